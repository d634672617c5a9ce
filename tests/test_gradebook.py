"""tools/course/gradebook.py: the course-wide gradebook and its Canvas and Moodle layouts, from score tables written
the way `make grade` writes them (tools/course/grade.write_table)."""

from __future__ import annotations

import csv

import pytest

from tools.course.grade import Result, write_table
from tools.course.gradebook import CANVAS_FIRST, MOODLE_FIRST, write_gradebook, write_written_sheet


def _rows(path):
    return list(csv.reader(path.open(encoding="utf-8", newline="")))


@pytest.fixture
def course(tmp_path):
    points_01 = {"ch01-ex-softmax": 1, "ch01-ex-one-query": 2}
    points_03 = {"ch03-ex-qkv": 1, "ch03-ex-concat": 3}
    write_table([Result("ada", {"ch01-ex-softmax": 1, "ch01-ex-one-query": 2}),
                 Result("bob", {"ch01-ex-softmax": 1, "ch01-ex-one-query": 0}, {"ch01-ex-one-query": "wrong"})],
                points_01, tmp_path / "scores" / "ch01.csv")
    write_table([Result("ada", {"ch03-ex-qkv": 0, "ch03-ex-concat": 3})],  # bob handed nothing in for chapter 3
                points_03, tmp_path / "scores" / "ch03.csv")
    return tmp_path


def test_gradebook_totals_per_chapter_and_course(course):
    rows = _rows(write_gradebook(course)["gradebook"])
    assert rows[0] == ["learner", "ch01 (3)", "ch03 (4)", "total (7)"]
    assert rows[1:] == [["ada", "3", "3", "6"], ["bob", "1", "", "1"]]  # bob not graded in chapter 3: blank


def test_without_a_roster_no_import_file_is_written(course, capsys):
    paths = write_gradebook(course)
    assert set(paths) == {"gradebook"} and not (course / "gradebook" / "canvas.csv").exists()
    assert "without a roster" in capsys.readouterr().err


def _roster(course):
    roster = course / "roster.csv"
    roster.write_text("learner,name,email,username,section\nada,\"Lovelace, Ada\",ada@uni.edu,alovelace,A\n"
                      "bob,\"Boole, George\",gb@uni.edu,gboole,B\ncyd,\"Doe, Cyd\",cyd@uni.edu,cdoe,B\n",
                      encoding="utf-8")
    return roster


def test_canvas_layout(course):
    rows = _rows(write_gradebook(course, _roster(course))["canvas"])
    assert rows[0][:5] == CANVAS_FIRST == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert rows[0][5:] == ["ch01: Attention, token by token", "ch03: Multi-head attention"], rows[0]
    assert rows[1] == ["Points Possible", "", "", "", "", "3", "4"]
    assert [r[0] for r in rows[2:]] == ["Lovelace, Ada", "Boole, George", "Doe, Cyd"]
    assert [r[5:] for r in rows[2:]] == [["3", "3"], ["1", ""], ["", ""]]  # blank: not graded
    assert all(len(r) == len(rows[0]) for r in rows)


def test_moodle_layout_with_a_roster(course):
    paths = write_gradebook(course, _roster(course))
    moodle = _rows(paths["moodle"])
    assert moodle[0][:4] == MOODLE_FIRST
    assert moodle[1:] == [["ada@uni.edu", "alovelace", "", "Lovelace, Ada", "3", "3"],
                          ["gb@uni.edu", "gboole", "", "Boole, George", "1", ""],
                          ["cyd@uni.edu", "cdoe", "", "Doe, Cyd", "", ""]]  # in the roster, never graded: blank
    canvas = _rows(paths["canvas"])
    assert canvas[2][:5] == ["Lovelace, Ada", "", "ada", "ada", "A"]


def test_bad_inputs_are_named(course, tmp_path):
    roster = course / "roster.csv"
    roster.write_text("learner,email\nada,ada@uni.edu\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"no row for \['bob'\]"):
        write_gradebook(course, roster)
    roster.write_text("student,email\nada,a@b\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="needs a column 'learner'"):
        write_gradebook(course, roster)
    with pytest.raises(SystemExit, match="no score tables"):
        write_gradebook(tmp_path / "empty")


def test_written_answers_are_graded_by_hand_beside_the_chapter(course):
    sheet = course / "scores" / "ch01-written.csv"
    written = {"ch01-ex-softmax-written-0": 1, "ch01-pp-zero-query-written-0": 1}
    write_written_sheet(sheet, ["ada", "bob"], written)
    rows = _rows(sheet)
    assert rows == [["learner", "ch01-ex-softmax-written-0 (1)", "ch01-pp-zero-query-written-0 (1)"],
                    ["ada", "", ""], ["bob", "", ""]]
    # nothing entered yet: the column is there, every cell blank (not 0)
    book = _rows(write_gradebook(course)["gradebook"])
    assert book[0] == ["learner", "ch01 (3)", "ch01 written (2)", "ch03 (4)", "total (9)"]
    assert [r[2] for r in book[1:]] == ["", ""]
    sheet.write_text(sheet.read_text(encoding="utf-8").replace("ada,,", "ada,1,0.5"), encoding="utf-8")
    write_written_sheet(sheet, ["ada", "bob", "cyd"], written)  # graded again, with a new learner: ada's kept
    assert _rows(sheet)[1:] == [["ada", "1", "0.5"], ["bob", "", ""], ["cyd", "", ""]]
    book = _rows(write_gradebook(course)["gradebook"])
    assert book[1] == ["ada", "3", "1.5", "3", "7.5"] and book[2][2] == "", book
    canvas = _rows(write_gradebook(course, _roster(course))["canvas"])
    assert canvas[0][6] == "ch01: Attention, token by token, written answers" and canvas[1][6] == "2"
    sheet.write_text(sheet.read_text(encoding="utf-8").replace("bob,,", "bob,2,"), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"bob, ch01-ex-softmax-written-0 \(1\): '2' is not a number of points"):
        write_gradebook(course)
