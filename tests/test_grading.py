"""Autograding with nbgrader (tools/course/assignments.py and grade.py): chapter 1's assignment is graded from
synthetic submissions, and each learner's scores per exercise must come out as the answers deserve.

- right: the instructor's version, every stub followed by the book's solution -> full marks;
- wrong: the same with one answer wrong (attend_one without the 1/sqrt(d_k)) -> that exercise 0, the others full;
- empty: the release as handed out -> 0 everywhere;
- careless: one answer loops for ever, one deletes another learner's submission and a file outside the course, one
  ends its kernel, one raises -> those four 0, each with the reason, the last exercise full, the files untouched;
- segfault: one answer crashes the Python process (the guard cannot refuse it) -> that exercise 0 ("kernel died"),
  the others full;
and some that game the grader instead of answering (tools/course/tampering.py, hidden_tests.py, grade.rebuild):
- monkeypatch: the release as handed out, with the check functions and tfm.check.check_answer replaced by functions
  that pass, in the first answer cell -> 0 everywhere (every check ran after the patch), each note saying why;
- peeking and hard-coding (one learner, two exercises): the right answers, but the first pencil-and-paper answer
  reads the notebook's own file (where the expected values could be found) -> that exercise and the one after it
  0; and attend_one with the public check's d_k = 3 written in -> the hidden tests (other sizes) give it 0;
- added: the release as handed out and a cell of its own that replaces the checks -> 0 everywhere (the cell is not
  in what is graded);
- stripped: the release with every check cell emptied and its nbgrader metadata deleted -> 0 everywhere (the
  release's check cells are graded);
- main, input_transformer, custom_exception_handler: the release with the checks replaced through `__main__`, an
  IPython input transformer that empties every later check cell, or an exception handler that hides every failure
  -> 0 everywhere (whatever nbgrader's kernel made of them, each check also runs apart from the answers,
  tools/course/apart.py; the tests at the end try more tricks against that alone).

The twelve are graded three at a time (grade.py's --jobs; the looping one idles while it waits), each in a course
folder of its own, and grading runs only the cells the checks need (tools/course/needed_cells.py).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import nbformat
import pytest
import torch

from tools.book.exercises import find_exercises
from tools.course import apart, grade
from tools.course.assignments import assignment_name, graded_exercises, source_notebook, write_course, written_answers
from tools.course.hidden_tests import HIDDEN_TESTS

ROOT = Path(__file__).resolve().parents[1]

CHAPTER = ROOT / "chapters" / "01_attention_token_by_token.ipynb"
POINTS = {"ch01-ex-softmax": 1, "ch01-ex-one-query": 2, "ch01-ex-design": 3, "ch01-pp-by-hand": 1,
          "ch01-pp-zero-query": 2}


def _answer_label(cell) -> str | None:
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
    return grade_id.rsplit("-answer-", 1)[0] if "-answer-" in grade_id else None


def _submission(source, edits: dict[str, str] | None = None, replace: tuple[str, str, str] | None = None):
    """The instructor's version (stubs followed by the book's solutions) as a learner's submission, with `edits`
    (label -> code appended to that exercise's answer) and `replace` ((label, old, new) in its answer)."""
    nb = nbformat.from_dict(source)
    for cell in nb.cells:
        label = _answer_label(cell)
        cell.source += (edits or {}).get(label, "")
        if replace and label == replace[0]:
            assert replace[1] in cell.source
            cell.source = cell.source.replace(replace[1], replace[2])
    return nb


PEEK = f"\nimport json\nbook = json.load(open({CHAPTER.name!r}))  # the expected values are in there\n"
PATCH = ("check_softmax = check_attend_one = check_new_query_matrix = lambda *a, **k: None\n"
         "check_weights_by_hand = check_zero_query = lambda *a, **k: None\n"
         "tfm.check.check_answer = lambda *a, **k: None\n")


def _prefixed(release, label: str, code: str):
    """The release with `code` at the top of the first answer cell of `label`."""
    nb = nbformat.from_dict(release)
    cell = next(c for c in nb.cells if _answer_label(c) == label)
    cell.source = code + cell.source
    return nb


def _added_cell(release, code: str):
    """The release with a code cell of the learner's own (no nbgrader metadata) after the setup cell."""
    nb = nbformat.from_dict(release)
    nb.cells.insert(2, nbformat.v4.new_code_cell(code))
    return nb


def _stripped_checks(release):
    """The release with every check cell emptied and its nbgrader metadata deleted (nbgrader restores a locked cell
    it can find by grade_id only)."""
    nb = nbformat.from_dict(release)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade") and not cell.metadata["nbgrader"].get("solution"):
            del cell.metadata["nbgrader"]
            cell.source = "pass"
    return nb


def test_a_submission_is_rebuilt_from_the_release(tmp_path):
    """Only the answer cells' source crosses over, matched by grade_id: added cells, edited or stripped locked cells
    are gone; an answer cell whose grade_id is missing leaves its stub, and says so."""
    course = tmp_path / "course"
    write_course(course, [CHAPTER])
    name = assignment_name(CHAPTER)
    release = nbformat.read(course / "release" / name / CHAPTER.name, as_version=4)
    source = nbformat.read(course / "source" / name / CHAPTER.name, as_version=4)
    right = _submission(source)
    for cell in right.cells:  # and the learner's other attempts on the grader
        if cell.metadata.get("nbgrader", {}).get("grade") and not cell.metadata["nbgrader"].get("solution"):
            cell.source = "pass"
    right.cells.insert(1, nbformat.v4.new_code_cell(PATCH))
    lost = next(c for c in right.cells if _answer_label(c) == "ch01-ex-design")
    del lost.metadata["nbgrader"]
    rebuilt, lacking = grade.rebuild(release, right)
    assert [c.source for c in rebuilt.cells if not c.metadata.get("nbgrader", {}).get("solution")] == [
        c.source for c in release.cells if not c.metadata.get("nbgrader", {}).get("solution")]
    answers = {_answer_label(c): c.source for c in rebuilt.cells if _answer_label(c)}
    assert answers["ch01-ex-softmax"] == next(c.source for c in right.cells if _answer_label(c) == "ch01-ex-softmax")
    assert lacking == ["ch01-ex-design"]
    assert answers["ch01-ex-design"] == next(c.source for c in release.cells if _answer_label(c) == "ch01-ex-design")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    outside = tmp_path_factory.mktemp("outside") / "keep.txt"
    outside.write_text("the instructor's file", encoding="utf-8")
    write_course(course, [CHAPTER])
    name = assignment_name(CHAPTER)
    release = nbformat.read(course / "release" / name / CHAPTER.name, as_version=4)
    source = nbformat.read(course / "source" / name / CHAPTER.name, as_version=4)
    others = grade.grading_folder(course, CHAPTER) / "submitted" / "right"  # another learner's submission
    right = _submission(source)
    for cell in right.cells:  # the right learner also explains why the shift is allowed
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "ch01-ex-softmax-written-0":
            cell.source = "Numerator and denominator are both multiplied by exp(-c)."
    submissions = {
        "right": right,
        "wrong": _submission(source, replace=("ch01-ex-one-query", "/ math.sqrt(q.shape[0])", "")),
        "empty": release,
        "careless": _submission(source, {
            "ch01-ex-softmax": "\nimport time\nwhile True:\n    time.sleep(1)\n",  # idle: no core taken
            "ch01-ex-design": f"\nimport os, shutil\nshutil.rmtree({str(others)!r})\nos.remove({str(outside)!r})\n",
            "ch01-ex-one-query": "\nimport os\nos._exit(1)\n",
            "ch01-pp-by-hand": "\nraise RuntimeError('unfinished')\n"}),
        # in the first exercise, so that one regrade without it finds the culprit (the grader tries them in order)
        "segfault": _submission(source, {"ch01-ex-softmax": "\nimport ctypes\nctypes.string_at(0)\n"}),
        "monkeypatch": _prefixed(release, "ch01-ex-softmax", PATCH),
        "peeking": _submission(source, {"ch01-pp-by-hand": PEEK},  # and hard-codes d_k in another exercise
                               replace=("ch01-ex-one-query", "/ math.sqrt(q.shape[0])", "/ math.sqrt(3)")),
        "added": _added_cell(release, PATCH),  # an empty notebook and a cell of its own that disables the checks
        "stripped": _stripped_checks(release),  # an empty notebook whose check cells lost their metadata
        **{trick.replace(" ", "_"): _prefixed(release, "ch01-ex-softmax", TRICKS[trick])
           for trick in ("main", "input transformer", "custom exception handler")},
    }
    folder = tmp_path_factory.mktemp("submissions")
    for learner, nb in submissions.items():
        nbformat.write(nb, folder / f"{learner}.ipynb")
    # 30 s per cell: short enough for the looping answer, long enough for a busy machine to import torch
    results = grade.grade(CHAPTER, grade.collect(folder), course, timeout=30, jobs=3)  # the looping one idles
    table = grade.write_table(results, graded_exercises(CHAPTER), course / "scores" / f"{name}.csv")
    grade.write_written(course, CHAPTER, results)
    return {r.learner: r for r in results}, table, course / "scores" / f"{name}.csv", outside, others, course


def test_release_keeps_the_stubs_and_drops_the_solutions(graded):
    course = graded[-1]
    release = nbformat.read(course / "release" / "ch01" / CHAPTER.name, as_version=4)
    text = "\n".join(c.source for c in release.cells)
    assert "_solution" not in text and "BEGIN SOLUTION" not in text
    answers = [c.source.rstrip() for c in release.cells if _answer_label(c)]
    chapter = nbformat.read(CHAPTER, as_version=4).cells
    stubs = [chapter[k].source.rstrip() for e in find_exercises(chapter) for k in range(e.start + 1, e.end)
             if chapter[k].cell_type == "code"]
    assert answers == stubs, "the release's answer cells are not the book's stubs"
    graded = [c.metadata["nbgrader"] for c in release.cells if c.metadata.get("nbgrader", {}).get("grade")]
    checks = [m for m in graded if not m.get("solution")]
    assert {m["grade_id"].rsplit("-check-", 1)[0]: m["points"] for m in checks} == POINTS
    by_hand = {m["grade_id"]: m["points"] for m in graded if m.get("solution")}
    assert by_hand == written_answers(CHAPTER) == {"ch01-ex-softmax-written-0": 1, "ch01-ex-design-written-0": 1,
                                                   "ch01-pp-zero-query-written-0": 1}


def test_exercise_points_are_the_stars():
    assert graded_exercises(CHAPTER) == POINTS


def test_right_wrong_and_empty_submissions(graded):
    results, table, *_ = graded
    assert results["right"].scores == POINTS and not results["right"].notes
    assert results["wrong"].scores == {**POINTS, "ch01-ex-one-query": 0}
    assert results["empty"].scores == dict.fromkeys(POINTS, 0)
    assert "| right | 1 | 2 | 3 | 1 | 2 | 9 |" in table, table
    assert "attend_one" in results["wrong"].notes["ch01-ex-one-query"], "no note from the check's message"


def test_careless_submission_loses_only_the_exercises_it_broke(graded):
    results, _, _, outside, others, _ = graded
    careless = results["careless"]
    assert careless.scores == {**dict.fromkeys(POINTS, 0), "ch01-pp-zero-query": 2}, careless
    assert careless.notes["ch01-ex-softmax"] == "timed out"
    assert "outside the submission's folder" in careless.notes["ch01-ex-design"]
    assert "ending or signalling the kernel" in careless.notes["ch01-ex-one-query"]
    assert careless.notes["ch01-pp-by-hand"] == "its answer cell raised RuntimeError"
    assert outside.exists() and (others / "ch01" / CHAPTER.name).exists(), "a submission deleted files"
    assert results["right"].scores == POINTS, "graded after the careless one, the right submission lost points"


def test_segfault_loses_only_its_exercise(graded):
    segfault = graded[0]["segfault"]
    assert segfault.scores == {**POINTS, "ch01-ex-softmax": 0} and segfault.notes == {
        "ch01-ex-softmax": "kernel died"}, segfault


def test_gaming_submissions_score_zero_for_what_they_faked(graded):
    results = graded[0]
    monkeypatch = results["monkeypatch"]
    assert monkeypatch.scores == dict.fromkeys(POINTS, 0), monkeypatch
    assert "changes the grader: rebinds check_attend_one" in monkeypatch.notes["ch01-ex-softmax"], monkeypatch.notes
    assert all("the answer to ch01-ex-softmax changes the grader" in monkeypatch.notes[label]
               for label in list(POINTS)[1:]), monkeypatch.notes
    peeking = results["peeking"]  # and hard-coding, in another exercise
    assert peeking.scores == {**POINTS, "ch01-pp-by-hand": 0, "ch01-pp-zero-query": 0, "ch01-ex-one-query": 0}, peeking
    assert "imports json" in peeking.notes["ch01-pp-by-hand"] and "reads a notebook file" in peeking.notes[
        "ch01-pp-by-hand"]
    assert "d_k = 2" in peeking.notes["ch01-ex-one-query"], peeking.notes


def test_code_outside_the_answer_cells_never_reaches_the_grader(graded):
    results = graded[0]
    assert results["added"].scores == dict.fromkeys(POINTS, 0), results["added"]
    assert results["stripped"].scores == dict.fromkeys(POINTS, 0), results["stripped"]
    for trick in ("main", "input_transformer", "custom_exception_handler"):
        assert results[trick].scores == dict.fromkeys(POINTS, 0), results[trick]


def test_written_answers_go_to_the_instructor_to_grade_by_hand(graded):
    course = graded[-1]
    sheet = course / "scores" / f"{assignment_name(CHAPTER)}-written.csv"
    rows = list(csv.reader(sheet.open(encoding="utf-8", newline="")))
    assert rows[0] == ["learner", *[f"{g} ({p})" for g, p in written_answers(CHAPTER).items()]], rows[0]
    assert sorted(r[0] for r in rows[1:]) == sorted(graded[0]) and all(not any(r[1:]) for r in rows[1:])
    answers = sheet.with_suffix(".md").read_text(encoding="utf-8")
    softmax = answers.split("## ch01-ex-softmax-written-0", 1)[1].split("\n## ", 1)[0]
    assert "**right**\n\nNumerator and denominator are both multiplied by exp(-c)." in softmax, softmax
    assert "**empty**\n\nWrite your answer here" in softmax  # the release's stub: nothing written


def test_hidden_tests_are_graded_not_released(graded):
    course = graded[-1]
    release = "\n".join(c.source for c in nbformat.read(course / "release" / "ch01" / CHAPTER.name,
                                                         as_version=4).cells)
    source = "\n".join(c.source for c in nbformat.read(course / "source" / "ch01" / CHAPTER.name,
                                                        as_version=4).cells)
    assert "BEGIN HIDDEN TESTS" in source and "BEGIN HIDDEN TESTS" not in release and "generator(12)" not in release
    labels = {e.label for chapter in (ROOT / "chapters").glob("*.ipynb")
              for e in find_exercises(nbformat.read(chapter, as_version=4).cells) if e.checks}
    assert set(HIDDEN_TESTS) <= labels, set(HIDDEN_TESTS) - labels


def test_scores_csv_has_one_row_per_learner(graded):
    rows = list(csv.reader(graded[2].open(encoding="utf-8")))
    assert rows[0][:2] == ["learner", "ch01-ex-softmax (1)"] and rows[0][-2:] == ["total (9)", "notes"]
    assert {row[0]: row[-2] for row in rows[1:]} == {"careless": "2", "empty": "0", "right": "9", "segfault": "8",
                                                       "wrong": "7", "monkeypatch": "0", "peeking": "4",
                                                       "added": "0", "stripped": "0", "main": "0",
                                                       "input_transformer": "0", "custom_exception_handler": "0"}


def test_bad_submission_folders_are_named(tmp_path):
    with pytest.raises(SystemExit, match="holds no notebooks"):
        grade.collect(tmp_path)
    (tmp_path / "two").mkdir()
    for name in ("a.ipynb", "b.ipynb"):
        (tmp_path / "two" / name).write_text("{}", encoding="utf-8")
    with pytest.raises(SystemExit, match="one notebook per learner"):
        grade.collect(tmp_path)
    (tmp_path / "two" / "b.ipynb").unlink()
    (tmp_path / "two").rename(tmp_path / "Ada Lovelace")
    assert list(grade.collect(tmp_path)) == ["Ada_Lovelace"]
    (tmp_path / "mallory.ipynb").symlink_to(CHAPTER)  # (from an archive: the book's notebook, solutions and all)
    with pytest.raises(SystemExit, match="mallory.ipynb is a symbolic link"):
        grade.collect(tmp_path)
    with pytest.raises(SystemExit, match="no chapter '99'"):
        grade.chapter_path("99")


@pytest.mark.parametrize("chapter", sorted((ROOT / "chapters").glob("*.ipynb")), ids=lambda p: p.name[:2])
def test_every_chapter_becomes_an_assignment(chapter):
    cells = source_notebook(chapter).cells
    graded = {c.metadata["nbgrader"]["grade_id"].rsplit("-check-", 1)[0]: c.metadata["nbgrader"]["points"]
              for c in cells if "-check-" in c.metadata.get("nbgrader", {}).get("grade_id", "")}
    assert graded == graded_exercises(chapter) and len(graded) >= 3, graded
    book = find_exercises(nbformat.read(chapter, as_version=4).cells)
    written = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"] for c in cells
               if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution")}
    assert written == written_answers(chapter), "an exercise's written part has no manually graded answer cell"
    assert {e.label for e in book if not e.checks} <= {g.rsplit("-written-", 1)[0] for g in written}
    ids = [c.metadata.get("nbgrader", {}).get("grade_id", "") for c in cells]
    for e in book:  # a checked exercise's written part comes after the learner's code and before its check
        if e.checks and f"{e.label}-written-0" in written:
            k = ids.index(f"{e.label}-written-0")
            assert ids[k - 1].startswith(f"{e.label}-answer-") and ids[k + 1].startswith(f"{e.label}-check-"), \
                (e.label, ids[k - 1:k + 2])
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert not re.search(r"\{(?:exercise-start|exercise-end|term|footcite[:a-z]*|doc|numref)\}", prose), \
        "MyST that Jupyter shows raw is left in the assignment"
    assert prose.count("\n### ★") + prose.startswith("### ★") == len(book), "an exercise lost its heading"
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    assert "_solution" not in code and "Solution(" not in code, "a solution's name was not turned into the learner's"
    unmarked = [c.source[:60] for c in cells if c.cell_type == "code" and "nbgrader" not in c.metadata]
    assert not unmarked, f"code cells without nbgrader metadata: {unmarked}"


# Tricks on the grader that an empty notebook could try from its first answer cell. The reading of the code
# (tools/course/tampering.py) finds most of them, but the guarantee is that the checks run apart from the answers
# (tools/course/apart.py): each is graded here by that alone, with no reading at all.
TRICKS = {
    "alias": "import tfm.check as c\nc.check_close = c.check_answer = c.check_true = lambda *a, **k: None\n",
    "main": ("import __main__ as m\nfor n in dir(m):\n    if n.startswith('check_'):\n"
             "        setattr(m, n, lambda *a, **k: None)\n"),
    "magic": ("open('p.py', 'w').write('import tfm\\ntfm.check.check_answer = lambda *a, **k: None\\n')\n"
              "%run -i p.py\n"),
    "input transformer": ("get_ipython().input_transformers_cleanup.append(\n"
                          "    lambda lines: ['pass\\n'] if any('check_' in x for x in lines) else lines)\n"),
    "custom exception handler": "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n",
    "settrace": ("import sys\nsys.settrace(lambda frame, event, arg: None)\n"
                 "tfm.check.CheckFailed.__init__ = lambda self, *a: None\n"),
    "always equal": ("class Yes(torch.Tensor):\n    def __eq__(self, other):\n        return True\n"
                     "    def tolist(self):\n        return (0.67, 0.24, 0.09)\n"
                     "weights_by_hand = torch.zeros(3).as_subclass(Yes)\n"),
    "redefined check": "def check_attend_one(fn, name):\n    pass\nattend_one = print\n",
}


@pytest.fixture(scope="module")
def apart_course(tmp_path_factory):
    course = tmp_path_factory.mktemp("apart")
    write_course(course, [CHAPTER], only_needed=True)
    name = assignment_name(CHAPTER)
    return (course / "source" / name / CHAPTER.name, course / "release" / name / CHAPTER.name, course)


def _apart(apart_course, nb, folder: str) -> dict[str, str]:
    source, release, course = apart_course
    answers = course / folder / "answers" / CHAPTER.name
    answers.parent.mkdir(parents=True)
    nbformat.write(nb, answers)
    return apart.verdicts(source, release, answers, course / folder / "checks",
                          grade.grading_environment(course, folder), timeout=60)


def test_checks_run_apart_pass_the_right_answers_and_fail_the_empty(apart_course):
    source, release, _ = apart_course
    assert _apart(apart_course, nbformat.read(source, as_version=4), "right") == dict.fromkeys(POINTS, "")
    empty = _apart(apart_course, nbformat.read(release, as_version=4), "empty")
    assert set(empty) == set(POINTS) and all(empty.values()), empty
    assert "not written yet" in empty["ch01-ex-softmax"], empty


@pytest.mark.parametrize("trick", TRICKS)
def test_no_trick_of_the_answers_reaches_a_check_run_apart(apart_course, trick):
    release = nbformat.read(apart_course[1], as_version=4)
    found = _apart(apart_course, _prefixed(release, "ch01-ex-softmax", TRICKS[trick]), trick.replace(" ", "-"))
    assert set(found) == set(POINTS) and all(found.values()), (trick, found)


def test_checks_run_apart_refuse_the_library_and_the_instructors_files(apart_course):
    source, release, course = apart_course
    nb = _submission(nbformat.read(source, as_version=4), replace=(
        "ch01-ex-softmax", "    return exps / exps.sum()", "    return torch.softmax(scores, dim=-1)"))
    peek = f"\nimport json\nsource = json.load(open({str(source)!r}))\n"
    nb = _submission(nb, {"ch01-pp-by-hand": peek})
    found = _apart(apart_course, nb, "library")
    assert "softmax" in found["ch01-ex-softmax"] and "write it yourself" in found["ch01-ex-softmax"], found
    assert "reading " + str(source) + ", one of the instructor's files" in (
        course / "library" / "checks" / "answers.log").read_text(encoding="utf-8")
    # (the answer cell raised there: nbgrader's verdict, which grade.py keeps beside this one, gives it 0)
    assert found["ch01-ex-one-query"] == "" and found["ch01-pp-zero-query"] == "", found


def test_every_exercise_checked_only_in_the_kernel_is_one_of_the_books():
    labels = {e.label for chapter in (ROOT / "chapters").glob("*.ipynb")
              for e in find_exercises(nbformat.read(chapter, as_version=4).cells) if e.checks}
    assert set(apart.in_kernel()) <= labels, set(apart.in_kernel()) - labels
    assert len(apart.in_kernel()) <= len(labels) // 5, "most exercises must be checked apart"



ROW_TABLE = ("def my_padding_mask(lengths, max_len):\n    rows = {ROWS!r}\n"
             "    return torch.tensor([rows[n, max_len] for n in lengths.tolist()])\n")  # keyed by (length, max_len)


@pytest.mark.parametrize("table", ["whole cases", "rows"])
def test_a_table_of_the_visible_cases_fails_the_hidden_tests(tmp_path, table):
    # Chapter 4's padding mask has no hidden tests of its own (tools/course/hidden_tests.py): a table of its check's
    # three visible cases, computed elsewhere and pasted in, passes them; the fresh inputs drawn at grading time
    # (tools/course/fresh_inputs.py) do not.
    chapter = ROOT / "chapters" / "04_masking.ipynb"
    write_course(tmp_path, [chapter], only_needed=True)
    name = assignment_name(chapter)
    source, release = (tmp_path / kind / name / chapter.name for kind in ("source", "release"))
    cases = (([5, 3, 4], 5), ([1, 7], 9), ([0, 2], 3))
    whole = {(tuple(n), m): (torch.arange(m)[None, :] < torch.tensor(n)[:, None]).tolist() for n, m in cases}
    rows = {(n, m): (torch.arange(m) < n).tolist() for ns, m in cases for n in ns}
    lookup = (f"TABLE = {whole!r}\n\n\ndef my_padding_mask(lengths, max_len):\n"
              "    return torch.tensor(TABLE[tuple(lengths.tolist()), max_len])\n") if table == "whole cases" \
        else ROW_TABLE.replace("{ROWS!r}", repr(rows))
    nb = _submission(nbformat.read(source, as_version=4))
    next(c for c in nb.cells if _answer_label(c) == "ch04-ex-padding").source = lookup
    answers = tmp_path / "table" / "answers" / chapter.name  # (the row table also passes the check, tested below)
    answers.parent.mkdir(parents=True)
    nbformat.write(nb, answers)
    found = apart.verdicts(source, release, answers, tmp_path / "table" / "checks",
                           grade.grading_environment(tmp_path, "table"), timeout=60)
    assert "hidden test" in found["ch04-ex-padding"] and "KeyError" in found["ch04-ex-padding"], found
    right = {label: verdict for label, verdict in found.items() if label != "ch04-ex-padding"}
    assert right == dict.fromkeys(right, ""), right  # the other answers are the book's and still pass


ESCAPES = """
import os, signal, threading
TRIED = {{}}


def attempt(name, act):
    try:
        act()
        TRIED[name] = "done"
    except PermissionError as error:
        TRIED[name] = str(error)


attempt("thread", lambda: threading.Thread(target=print).start())
attempt("folder", lambda: os.open({folder!r}, os.O_RDONLY))
attempt("climb", lambda: open("../" * 12 + "etc/hostname"))
attempt("mkdir", lambda: os.mkdir({made!r}))
attempt("pidfd", lambda: os.pidfd_open(os.getpid()))
attempt("pidfd signal", lambda: signal.pidfd_send_signal(0, 0))
import _posixsubprocess, posix, sqlite3, sys
attempt("fork_exec", lambda: _posixsubprocess.fork_exec(*[None] * 21))
attempt("posix.kill", lambda: posix.kill(os.getpid(), 0))
attempt("posix._exit", lambda: posix._exit(0))
attempt("database", lambda: sqlite3.connect({database!r}))
attempt("link", lambda: os.symlink(".", "up"))
attempt("readable folder", lambda: os.open(sys.prefix, os.O_RDONLY))
print("TRIED", sorted(TRIED.items()))
"""
THREADED = ("def stable_softmax(scores):\n    import threading\n    out = []\n"
            "    worker = threading.Thread(target=lambda: out.append(torch.softmax(scores, dim=-1)))\n"
            "    worker.start()\n    worker.join()\n    return out[0]\n")


def test_the_guard_refuses_what_would_escape_it(apart_course):
    # What an adversarial review reached before these refusals: a thread that runs the library outside the check's
    # refusals (they hold in the learner's thread only); a folder's descriptor, through which os.open(name, dir_fd=...)
    # or os.fwalk reads a file the path check refuses; a relative path that climbs out; a folder made outside the
    # submission's (it crashed the grading of everyone after); signalling another process by its descriptor. And
    # what a second review reached: a program started below subprocess's audit event (_posixsubprocess), os.kill
    # reached as posix.kill, a gradebook opened by SQLite (which opens its files itself), a link resolved from its
    # own folder, a descriptor of a readable folder (where relative names were checked from the working folder).
    source, release, course = apart_course
    made = source.parent / "made-by-a-learner"
    nb = _submission(nbformat.read(source, as_version=4), {
        "ch01-pp-by-hand": ESCAPES.format(folder=str(source.parent), made=str(made),
                                          database=str(source.parent / "gradebook.db"))})
    nb = _submission(nb, replace=("ch01-ex-softmax", next(
        c.source for c in nb.cells if _answer_label(c) == "ch01-ex-softmax"), THREADED))
    found = _apart(apart_course, nb, "escapes")
    log = (course / "escapes" / "checks" / "answers.log").read_text(encoding="utf-8")
    tried = dict(eval(log.split("TRIED ", 1)[1].splitlines()[0]))
    assert set(tried) == {"thread", "folder", "climb", "mkdir", "pidfd", "pidfd signal", "fork_exec", "posix.kill",
                          "posix._exit", "database", "link", "readable folder"}, log[-2000:]
    assert all("refused while grading" in why for why in tried.values()), tried
    assert not made.exists()
    assert not (source.parent / "gradebook.db").exists()
    assert "thread" in found["ch01-ex-softmax"], found  # the threaded one-call answer fails its check
    assert found["ch01-ex-one-query"] == "", found  # the right answers still pass


def test_an_answer_typed_as_a_numpy_array_is_checked_apart(apart_course):
    # An honest answer in another type that the check accepts: the checks process must read it (a NumPy array
    # compared with a string gives an array, whose truth stopped the whole process once).
    source, _, _ = apart_course
    nb = _submission(nbformat.read(source, as_version=4), {
        "ch01-pp-by-hand": "\nimport numpy as np\nweights_by_hand = np.array([0.67, 0.24, 0.09])\n"})
    assert _apart(apart_course, nb, "numpy") == dict.fromkeys(POINTS, "")


def test_a_sparse_tensor_with_indices_out_of_range_is_refused_as_it_is_read():
    bad = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1.0, 2.0]), (2,))
    bad._indices()[0, 1] = 10**9  # now out of range: densifying it would read outside its memory
    with pytest.raises(RuntimeError, match="index|bound|invariant"):
        apart._load(apart._dump(bad))
