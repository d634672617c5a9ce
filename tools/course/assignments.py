"""The book's exercises as nbgrader assignments: one assignment per chapter, graded by the chapter's own checks.

Usage: python -m tools.course.assignments [--course build/course] [chapters/NN_*.ipynb ...]   (`make assignments`)

Writes an nbgrader course folder: `source/chNN/<chapter>.ipynb` (the instructor's version) for every chapter, then
runs `nbgrader generate_assignment`, which records the graded cells in the course's gradebook and writes
`release/chNN/<chapter>.ipynb`, the notebook learners receive. The mapping from the book's exercise pattern
(tools/book/exercises.py) to nbgrader's cell types:

- the learner's answer cell (the stub between exercise-start and exercise-end) is an "autograded answer" cell; in the
  source version its stub is followed by the book's solution between nbgrader's BEGIN/END SOLUTION markers, renamed
  from `<name>_solution` (a class: `<Name>Solution`) to `<name>`, so the source runs and passes;
  generate_assignment removes the solution and leaves the book's stub (ClearSolutions.code_stub is empty);
- the exercise's check (the cell tagged raises-exception after it) is an "autograder tests" cell worth the
  exercise's stars (★ = 1 point, ★★ = 2, ★★★ = 3): it passes when the answer is right and raises CheckFailed
  otherwise, so the book's checks are the grading tests;
- every other code cell is read-only (locked): nbgrader restores the instructor's version of locked and test cells
  before grading, so a submission cannot change a check or the code it relies on;
- exercises listed in tools/course/hidden_tests.py get hidden tests in their check (other sizes and inputs), which
  the release does not show and the grader runs;
- the solutions are removed as in the student edition (tools/book/student_edition.py); an exercise without a check
  (answered in prose) gets a "manually graded answer" cell worth its stars, graded by hand in nbgrader's formgrader;
- an exercise with a check whose statement also asks for an explanation (why, explain, say in words: `asks_why`)
  gets a manually graded answer cell for it after the learner's code, worth 1 point (`written_answers`): the check
  grades the code, the rubric of appendices/exercise_guide.md the explanation, which no check can see;
- what Jupyter would show raw becomes plain Markdown (for_learners): each exercise opens with a heading of its stars
  and title, the book's roles ({term}, {footcite}, ...) become text, so the feedback notebooks read cleanly.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

from tools.book.exercises import find_exercises, is_marker
from tools.book.myst import myst_to_markdown
from tools.book.notebooks import ROOT, notebooks
from tools.book.student_edition import student_cells
from tools.course.hidden_tests import HIDDEN_TESTS
from tools.course.needed_cells import SKIPPED, needed_cells

DEFAULT_COURSE = ROOT / "build" / "course"
SCHEMA_VERSION = 3  # nbgrader's cell metadata schema (nbgrader 0.9)
SOLUTION_NAME = re.compile(r"\b([A-Za-z]\w*?)(?:_solution|Solution)\b")  # attend_one_solution, MyClassSolution
TITLE_LINE = re.compile(r"^# @title[^\n]*\n")
NBGRADER_CONFIG = """\
# nbgrader configuration of the book's course folder (written by tools/course/assignments.py: edit it, not this)
c = get_config()
c.CourseDirectory.root = {root!r}
c.ClearSolutions.code_stub = {{"python": ""}}  # learners keep the book's stub, not nbgrader's generic one
c.ClearSolutions.enforce_metadata = True
c.ClearSolutions.text_stub = {written!r}  # what a learner finds in a written answer's cell
c.Execute.timeout = {timeout}  # seconds per cell; a cell that runs longer is interrupted and its exercise scores 0
c.Execute.iopub_timeout = 60  # seconds for a finished cell's last output (nbgrader's 4 s failed notebooks under load)
"""


def assignment_name(chapter: Path) -> str:
    """chapters/03_multi_head_attention.ipynb -> ch03."""
    return f"ch{chapter.name[:2]}"


def points(grade: str) -> int:
    return len(grade)  # ★ = 1, ★★ = 2, ★★★ = 3


def _nbgrader(cell, grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
              points: int | None = None) -> None:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta


def graded_exercises(chapter: Path) -> dict[str, int]:
    """The exercises of a chapter that its assignment grades (those with a check), in book order -> their points."""
    return {e.label: points(e.grade) for e in find_exercises(nbformat.read(chapter, as_version=4).cells) if e.checks}


def source_notebook(chapter: Path, only_needed: bool = False) -> nbformat.NotebookNode:
    """The instructor's version of a chapter's assignment (see the module docstring); with `only_needed`, the version
    that grading runs, in which the locked cells that no check depends on hold a comment instead of their code
    (tools/course/needed_cells.py)."""
    nb = nbformat.read(chapter, as_version=4)
    graded: set[int] = set()  # cells that are not read-only
    for exercise in find_exercises(nb.cells):
        answers = [k for k in range(exercise.start + 1, exercise.end) if nb.cells[k].cell_type == "code"]
        if not exercise.checks:
            continue  # a pencil-and-paper exercise answered in prose only
        solution = [nb.cells[k].source for k in range(*exercise.solution) if nb.cells[k].cell_type == "code"]
        if not answers or not solution:
            raise ValueError(f"{chapter.name}: {exercise.label} has a check but no answer cell or no solution code")
        code = SOLUTION_NAME.sub(r"\1", "\n\n".join(TITLE_LINE.sub("", s) for s in solution)).strip()
        last = nb.cells[answers[-1]]  # the solution goes last, so that no later stub redefines its names
        last.source = f"{last.source.rstrip()}\n### BEGIN SOLUTION\n{code}\n### END SOLUTION"
        for n, k in enumerate(answers):
            _nbgrader(nb.cells[k], f"{exercise.label}-answer-{n}", solution=True)
        for n, k in enumerate(exercise.checks):
            _nbgrader(nb.cells[k], f"{exercise.label}-check-{n}", grade=True, locked=True,
                      points=points(exercise.grade))
        if exercise.label in HIDDEN_TESTS:  # removed from the release, put back by nbgrader when it grades
            last_check = nb.cells[exercise.checks[-1]]
            body = "\n".join(f"    {line}" if line else line for line in HIDDEN_TESTS[exercise.label].splitlines())
            last_check.source = (f"{last_check.source.rstrip()}\n### BEGIN HIDDEN TESTS\n"  # in a function: its
                                 f"def _hidden_tests():\n{body}\n\n\n_hidden_tests()\n"  # names stay its own
                                 "del _hidden_tests\n### END HIDDEN TESTS")
        graded.update(answers + exercise.checks)
    for k, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and k not in graded:
            _nbgrader(cell, f"{assignment_name(chapter)}-cell-{k:03d}", locked=True)
    nb.cells = for_learners(student_cells(nb.cells))
    if only_needed:
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        required = {k for k, cell in enumerate(code) if k == 0 or cell.metadata["nbgrader"].get("solution")
                    or cell.metadata["nbgrader"].get("grade")}  # the setup, the answers and the checks
        keep = needed_cells([cell.source for cell in code], required)
        for k, cell in enumerate(code):
            if k not in keep:
                cell.source, cell.outputs = SKIPPED, []
    return nb


WRITTEN = ("Write your answer here: the working or the explanation the exercise asks for (graded by hand, with "
           "its rubric).")
ASKS_WHY = re.compile(r"\b(?:[Ww]hy\b|[Ee]xplain|[Ss]ay (?:in words|why|what))")


def asks_why(exercise, cells: list) -> bool:
    """Whether a checked exercise's statement also asks the learner to explain something (its written part)."""
    statement = "\n".join(cells[k].source for k in range(exercise.start, exercise.end + 1)
                          if cells[k].cell_type == "markdown")
    return bool(exercise.checks) and bool(ASKS_WHY.search(statement))


def written_answers(chapter: Path) -> dict[str, int]:
    """The manually graded answers of a chapter's assignment (`<label>-written-0` -> points), in book order: an
    exercise answered in prose is worth its stars, the explanation a checked exercise asks for 1 point."""
    cells = nbformat.read(chapter, as_version=4).cells
    return {f"{e.label}-written-0": (1 if e.checks else points(e.grade))
            for e in find_exercises(cells) if not e.checks or asks_why(e, cells)}


def for_learners(cells: list) -> list:
    """The cells as Jupyter shows them outside the website, and a written answer for every exercise without a check:
    each exercise opens with a heading of its stars and title (not the sphinx-exercise fence, which Jupyter and the
    feedback notebook would show raw), its closing fence goes, the book's MyST roles become plain text, an exercise
    that no check grades (answered in prose) gets a "manually graded answer" cell worth its stars, and a checked
    exercise that asks for an explanation one worth 1 point in its fence's place, after the learner's code."""
    found = {e.start: e for e in find_exercises(cells)}
    ends = {e.end: e for e in found.values() if not e.checks or asks_why(e, cells)}
    out = []
    for k, cell in enumerate(cells):
        if k in found:
            e = found[k]
            cell.source = f"### {e.grade} {myst_to_markdown(e.title)}"
        elif k in ends:  # the end of an exercise with a written part: its answer cell takes the fence's place
            e = ends[k]
            cell = nbformat.v4.new_markdown_cell(WRITTEN)
            cell.metadata["nbgrader"] = {"grade": True, "grade_id": f"{e.label}-written-0", "locked": False,
                                         "points": 1 if e.checks else points(e.grade),
                                         "schema_version": SCHEMA_VERSION,
                                         "solution": True, "task": False}
        elif is_marker(cell, "exercise-end"):
            continue
        elif cell.cell_type == "markdown":
            cell.source = myst_to_markdown(cell.source)
        out.append(cell)
    return out


def write_course(course: Path, chapters: list[Path], timeout: int = 180, only_needed: bool = False) -> list[str]:
    """Write the course folder's source versions and config, generate the releases; return the assignment names.
    `only_needed`: the versions that grading runs (source_notebook), for grade.py's own folder only."""
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(NBGRADER_CONFIG.format(root=str(course), timeout=timeout,
                                                                      written=WRITTEN),
                                               encoding="utf-8")
    names = []
    for chapter in chapters:
        name = assignment_name(chapter)
        folder = course / "source" / name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(source_notebook(chapter, only_needed), folder / chapter.name)
        run_nbgrader(course, "generate_assignment", name, "--force")
        names.append(name)
    return names


def run_nbgrader(course: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """One nbgrader command in the course folder (the venv's nbgrader); raises with its log when it fails."""
    bin_dir = Path(sys.executable).parent  # nbgrader calls the venv's alembic by name
    env = {**(os.environ if env is None else env)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=course, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", type=Path)
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE)
    args = parser.parse_args()
    chapters = [p.resolve() for p in args.chapters] or notebooks()
    for name in write_course(args.course.resolve(), chapters):
        print(f"{args.course / 'release' / name}: released")
    return 0


if __name__ == "__main__":
    sys.exit(main())
