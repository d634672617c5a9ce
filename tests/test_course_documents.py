"""The course documents say what the tools do: the syllabus's schedule is the instructor guide's plans, its run time
the chapters' budgets, the course kit's points the assignments' graded exercises, and every session's quiz and
in-class exercises fit the minutes its plan gives them, in every plan. A change to a plan, a budget or an exercise
that a document does not follow turns this red."""

from __future__ import annotations

import re

import pytest

from tools import ROOT
from tools.book.notebooks import BUDGETS
from tools.course import slides
from tools.course.assignments import graded_exercises

APPENDICES = ROOT / "appendices"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def _read(name: str) -> str:
    return (APPENDICES / name).read_text(encoding="utf-8")


def _table(text: str, header: str) -> list[list[str]]:
    lines = text.split(header, 1)[1].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_kits_points_are_the_assignments():
    (points,) = [row for row in _table(_read("course_kit.md"), "| chapter | 1 | 2 |") if row[0] == "points"]
    expected = [sum(graded_exercises(chapter).values()) for chapter in CHAPTERS]
    assert [int(p) for p in points[1:]] == expected, (points, expected)


def test_the_syllabus_schedule_is_the_guides_plans():
    rows = _table(_read("syllabus.md"), "| session | sixteen sessions |")
    columns = {"sixteen": 1, "six": 2, "six-decoder": 3}
    assert set(columns) == set(slides.PLANS), "every plan of the guide has its column in the syllabus"
    for plan, column in columns.items():
        sessions = slides.read_plan(plan=plan)
        listed = [row[column] for row in rows if row[column]]
        assert len(listed) == len(sessions), (plan, listed)
        for session, cell in zip(sessions, listed, strict=True):
            assert cell.startswith(session.title), (plan, session.number, cell, session.title)
            home = [int(n) for n in re.findall(r"(\d+) read at home", cell)]
            assert home == session.read_before, (plan, session.number, cell, session.read_before)
    text = _read("syllabus.md")
    for plan in slides.PLANS:
        command = "`make slides`" if plan == "sixteen" else f"`make slides PLAN={plan}`"
        assert command in text, f"the syllabus does not say how to make the slides of the plan {plan!r}"


def test_the_syllabus_run_time_is_the_largest_budget():
    text = " ".join(_read("syllabus.md").split())
    assert f"within {max(BUDGETS.values())} seconds on a 2-core laptop" in text
    assert set(BUDGETS) == {chapter.stem for chapter in CHAPTERS}


def test_the_syllabus_weights_add_up_and_count_each_exercise_once():
    rows = _table(_read("syllabus.md"), "| part | what | weight |")
    assert sum(int(row[2].rstrip("%")) for row in rows) == 100, rows
    assert [row[0] for row in rows].count("exercises") == 1
    assert not any("quiz" in row[0] for row in rows), "a quiz is an exercise graded in the notebook: count it once"


def _minutes() -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r"^\| `(ch\d+-[\w-]+)` \|.*\| (\d+) min \|$", _read("exercise_guide.md"), re.M)}


@pytest.mark.parametrize("plan", sorted(slides.PLANS))
def test_every_sessions_exercises_and_quiz_fit_its_plan(plan):
    guide = _read("instructor_guide.md")
    rows = {int(row[0]): row for row in _table(guide.split(slides.PLANS[plan], 1)[1], "| session | chapter |")}
    minutes = _minutes()
    for session in slides.read_plan(plan=plan):
        _, _, reading, exercises, quiz, planned = rows[session.number]
        assert int(reading) + int(exercises) + int(quiz) == int(planned) <= 75, (plan, session.number)
        needed = sum(minutes[label] for label in session.in_class)
        assert session.in_class and needed <= int(exercises), (plan, session.number, session.in_class, exercises)
        # the quiz: a pencil-and-paper exercise of the chapter read at home before it, else of the session's own
        chapter = session.read_before[-1] if session.read_before else session.title_number
        papers = {label: m for label, m in minutes.items() if label.startswith(f"ch{chapter:02d}-pp-")}
        assert papers and min(papers.values()) <= int(quiz), (plan, session.number, papers, quiz)
