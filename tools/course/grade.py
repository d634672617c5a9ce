"""Grade a folder of submitted notebooks with nbgrader and the book's exercise checks; write a table of scores.

Usage: python -m tools.course.grade CHAPTER SUBMISSIONS [--course build/course] [--timeout 180]
       make grade CHAPTER=03 SUBMISSIONS=path/to/folder

SUBMISSIONS holds one notebook per learner, either `<learner>.ipynb` or `<learner>/<any name>.ipynb` (characters
other than letters, digits, '.', '_' and '-' in a learner's name become '_'). Each run grades in a fresh nbgrader
course folder of its own, `<course>/grading/chNN` (assignments.py writes the chapter's assignment there from today's
chapter; the hand-out folders of `make assignments` are never touched), with `nbgrader autograde`: the instructor's
version of every locked and test cell is put back, the notebook runs top to bottom in its own folder, and each
exercise check that passes earns the exercise's points. Learners are graded side by side (--jobs, one per CPU by
default), each in a copy of that folder with a gradebook of its own (`learners/<learner>/`); the graded notebooks are
collected in `autograded/<learner>/chNN/`.

What a submission cannot do to the grading:
- reach it from outside its answers: each submission is rebuilt from the release (`rebuild`), only the source of its
  answer cells (matched by nbgrader grade_id) copied in; a cell it added, or a locked cell it edited or stripped of
  its metadata, is not graded at all;
- loop: a cell running longer than --timeout seconds is interrupted; its exercise scores 0, the notebook goes on;
- crash: an answer cell that raises scores 0 even if its check passed; a cell that tries to end its kernel is
  refused, and one that kills it anyway (a segmentation fault) is graded again without that answer;
- reach a check from its answers (an alias, `__main__`, a magic, an input transformer): each exercise keeps its
  points only if its check, run again in a process the learner's code never ran in (apart.py), passes too (except
  the few exercises apart.in_kernel() lists, whose checks need the learner's objects themselves);
- delete or overwrite files outside its folder, read the instructor's files, start programs, or take more than its
  memory and CPU-time limits: refused by grading_guard.py (an audit hook and resource limits in the grading kernel
  and the answers process); the exercise whose cells asked for it scores 0, whatever its check said.
One submission's failure never stops the others. The scores go to `<course>/scores/chNN.csv` and are printed as a
Markdown table: one row per learner, one column per exercise (points earned), the total and a note saying why an
exercise scored 0: the refusal, time-out or crash, or else the first line of the check's message. The answers graded
by hand (explanations, assignments.written_answers) go to `chNN-written.md`, question by question, and their points
to the sheet `chNN-written.csv` (blank until entered; grading again keeps what was entered), which `make gradebook`
reads.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools.book.exercises import find_exercises
from tools.book.notebooks import CHAPTERS, ENVIRONMENT, ROOT
from tools.course import apart
from tools.course.assignments import (
    DEFAULT_COURSE,
    assignment_name,
    graded_exercises,
    run_nbgrader,
    write_course,
    written_answers,
)
from tools.course.gradebook import write_written_sheet
from tools.course.tampering import module_names, protected_names, tampering

GUARD = Path(__file__).with_name("grading_guard.py")
GRADING_REFUSED = "refused while grading"  # the marker in tools/course/grading_guard.py's messages
CHECK_ID = re.compile(r"^(?P<label>.+)-(?:check|answer)-\d+$")
UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")  # nbgrader's student ids are folder names


@dataclass
class Result:
    learner: str
    scores: dict[str, float] = field(default_factory=dict)  # exercise label -> points earned
    notes: dict[str, str] = field(default_factory=dict)  # exercise label -> why it scored 0, when not a wrong answer
    failed: str = ""  # why the whole notebook could not be graded


def chapter_path(chapter: str) -> Path:
    matches = sorted(CHAPTERS.glob(f"{int(chapter):02d}_*.ipynb")) if chapter.isdigit() else []
    if len(matches) != 1:
        known = ", ".join(p.name[:2] for p in sorted(CHAPTERS.glob("*.ipynb")))
        raise SystemExit(f"no chapter {chapter!r}: give its number, one of {known}")
    return matches[0]


def collect(submissions: Path) -> dict[str, Path]:
    """learner -> their notebook, from `<learner>.ipynb` files and `<learner>/` folders with one notebook each."""
    if not submissions.is_dir():
        raise SystemExit(f"{submissions} is not a folder of submissions")
    found: dict[str, Path] = {}
    for entry in sorted(submissions.iterdir()):
        notebooks = [entry] if entry.suffix == ".ipynb" else sorted(entry.glob("*.ipynb")) if entry.is_dir() else []
        notebooks = [p for p in notebooks if ".ipynb_checkpoints" not in p.parts]
        if not notebooks:
            continue
        links = [p for p in (entry, *notebooks) if p.is_symlink()]
        if links:  # (an archive can hold one: a link to the instructor's notebook would be graded as the learner's)
            raise SystemExit(f"{links[0]} is a symbolic link: copy the learner's own file in its place")
        learner = UNSAFE.sub("_", entry.stem if entry.is_file() else entry.name).strip("_.") or "learner"
        if len(notebooks) > 1:
            raise SystemExit(f"{entry}: expected one notebook per learner, found {[p.name for p in notebooks]}")
        if learner in found:
            raise SystemExit(f"{entry} and {found[learner]} both become learner {learner!r}: rename one")
        found[learner] = notebooks[0]
    if not found:
        raise SystemExit(f"{submissions} holds no notebooks (<learner>.ipynb or <learner>/<name>.ipynb)")
    return found


def grading_environment(course: Path, learner: str) -> dict[str, str]:
    """The book's environment, an IPython profile whose start-up file is the guard, and a temporary folder of the
    learner's own (the guard lets a submission write only there and in its notebook's folder)."""
    ipython = course / "grading_ipython"
    startup = ipython / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    shutil.copy(GUARD, startup / "00-grading-guard.py")
    scratch = course / "grading_tmp" / learner
    scratch.mkdir(parents=True, exist_ok=True)
    top = course.parent.parent if course.parent.name == "learners" else course  # the chapter's grading folder
    private = os.pathsep.join(str(p.resolve()) for p in (ROOT, top))  # the guard refuses to read them
    return {**os.environ, **ENVIRONMENT, "IPYTHONDIR": str(ipython), "TMPDIR": str(scratch), "OMP_NUM_THREADS": "1",
            "GRADING_PRIVATE": private, "MPLCONFIGDIR": str(scratch)}


def grading_folder(course: Path, chapter: Path) -> Path:
    return course.resolve() / "grading" / assignment_name(chapter)


def learner_course(course: Path, learner: str) -> Path:
    """The nbgrader course folder in which one learner is graded (a copy of the chapter's, with its own gradebook):
    learners graded side by side never share a database."""
    return course / "learners" / learner


def grade(chapter: Path, submissions: dict[str, Path], course: Path = DEFAULT_COURSE,
          timeout: int = 180, jobs: int | None = None) -> list[Result]:
    """Autograde every submission of one chapter in a fresh course folder, `jobs` learners at a time (default: one per
    CPU); return each learner's scores, in the order of `submissions`.

    The chapter's assignment is written once into `<course>/grading/chNN` (submissions in its submitted/); each
    learner is graded in a copy of it, learners/<learner>, and the graded notebook is copied back to
    autograded/<learner>/chNN/."""
    name = assignment_name(chapter)
    course = grading_folder(course, chapter)
    shutil.rmtree(course, ignore_errors=True)  # nbgrader refuses to change an assignment that has submissions
    write_course(course, [chapter], timeout=timeout, only_needed=True)  # today's chapter, the cells checks need
    release = nbformat.read(course / "release" / name / chapter.name, as_version=4)
    missing: dict[str, list[str]] = {}
    for learner, path in submissions.items():
        target = course / "submitted" / learner / name / chapter.name
        target.parent.mkdir(parents=True)
        try:
            handed_in = nbformat.read(path, as_version=4)
        except Exception:  # not a notebook: graded as the release, every answer missing
            handed_in = nbformat.v4.new_notebook()
        rebuilt, missing[learner] = rebuild(release, handed_in)
        nbformat.write(rebuilt, target)

    def one(learner: str) -> Result:
        own = learner_course(course, learner)
        shutil.copytree(course, own, ignore=shutil.ignore_patterns("submitted", "learners", "autograded"))
        (own / "nbgrader_config.py").write_text(
            (course / "nbgrader_config.py").read_text(encoding="utf-8").replace(repr(str(course)), repr(str(own))),
            encoding="utf-8")
        shutil.copytree(course / "submitted" / learner, own / "submitted" / learner)
        result = grade_one(own, chapter, learner)  # none stops another
        if any(result.scores.values()):
            checked_apart(own, chapter, learner, result, timeout)
        graded = own / "autograded" / learner
        if graded.is_dir():
            shutil.copytree(graded, course / "autograded" / learner)
        return result

    def isolated(learner: str) -> Result:
        try:
            return one(learner)
        except Exception as error:  # one learner's failure (a file left unreadable, say) stops no other
            return Result(learner, failed=f"not graded: {type(error).__name__}: {str(error)[:200]}")

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = list(pool.map(isolated, submissions))
    for result in results:
        for label in missing[result.learner]:
            if not result.scores.get(label):
                result.notes.setdefault(label, "no answer cell of this exercise in the submission (matched by its "
                                               "nbgrader grade_id): its stub was graded")
    return results


def rebuild(release, submitted) -> tuple[nbformat.NotebookNode, list[str]]:
    """What is graded: the release, with the source of each of its answer cells taken from the submission's answer
    cell of the same nbgrader ``grade_id``. Nothing else of the submission crosses over, so a cell the learner added,
    a locked or check cell edited or stripped of its metadata, never reaches the grader. Returns the rebuilt notebook
    and the labels of the exercises whose answer cell the submission lacks (their stub stays)."""
    answers = {}
    for cell in submitted.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") and cell.cell_type in ("code", "markdown"):
            answers.setdefault(meta["grade_id"], (cell.cell_type, cell.source))
    rebuilt = nbformat.from_dict(release)
    lacking = []
    for cell in rebuilt.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("solution"):
            continue
        found = answers.get(meta.get("grade_id"))
        if found is not None and found[0] == cell.cell_type:
            cell.source = found[1]
        else:
            match = CHECK_ID.match(meta.get("grade_id", ""))
            lacking.append(match.group("label") if match else meta.get("grade_id", ""))
    return rebuilt, sorted(set(lacking))


def grade_one(course: Path, chapter: Path, learner: str) -> Result:
    """Autograde one submission. A kernel that dies (a crash the guard cannot refuse, such as a segmentation fault)
    ends nbgrader's run of the whole notebook: then each exercise's answer in turn is put back to the release's stub
    until the notebook runs through, and that exercise scores 0 with the note "kernel died"."""
    name = assignment_name(chapter)
    try:
        autograde(course, name, learner)
        return read_result(course, chapter, learner)
    except RuntimeError as error:
        if "DeadKernelError" not in str(error):
            return Result(learner, failed=f"not graded: {_first_error(str(error))}")
    submitted = course / "submitted" / learner / name / chapter.name
    original = nbformat.read(submitted, as_version=4)
    release = nbformat.read(course / "release" / name / chapter.name, as_version=4)
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells if _is_answer(c)}
    for label in {CHECK_ID.match(g).group("label"): 0 for g in stubs}:
        retry = nbformat.from_dict(original)
        for cell in retry.cells:
            if _is_answer(cell) and cell.metadata["nbgrader"]["grade_id"].startswith(f"{label}-answer-"):
                cell.source = stubs.get(cell.metadata["nbgrader"]["grade_id"], "")
        nbformat.write(retry, submitted)
        try:
            autograde(course, name, learner)
        except RuntimeError:
            continue
        result = read_result(course, chapter, learner)
        result.scores[label], result.notes[label] = 0.0, "kernel died"
        return result
    return Result(learner, failed="not graded: the kernel died whichever answer was left out")


def checked_apart(course: Path, chapter: Path, learner: str, result: Result, timeout: int) -> None:
    """Keep an exercise's points only if its check, run in a process of its own on the learner's answers
    (tools/course/apart.py), passes too; the exercises whose checks need the learner's objects themselves
    (apart.in_kernel()) keep nbgrader's verdict alone."""
    name = assignment_name(chapter)
    answers = course / "apart" / "answers" / chapter.name
    answers.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(course / "submitted" / learner / name / chapter.name, answers)
    found = apart.verdicts(course / "source" / name / chapter.name, course / "release" / name / chapter.name,
                           answers, course / "apart" / "checks", grading_environment(course, learner),
                           timeout=timeout)
    skip = apart.in_kernel()
    for label, points in result.scores.items():
        if not points or label in skip:
            continue
        why = found.get(label)
        if why is None:
            result.scores[label], result.notes[label] = 0.0, "its check could not be run apart from the answers"
        elif why:
            result.scores[label] = 0.0
            result.notes[label] = f"its check, run apart from the answers, failed: {why[:150]}"


def _first_error(log: str) -> str:
    """The line of nbgrader's log that names what went wrong (not its generic closing lines)."""
    lines = [line.strip() for line in log.splitlines() if "Error" in line and "There was an error" not in line]
    return (lines[-1] if lines else log.strip().splitlines()[-1])[:200]


def _is_answer(cell) -> bool:
    return cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution", False)


def autograde(course: Path, name: str, learner: str) -> None:
    run_nbgrader(course, "autograde", name, "--student", learner, "--create", "--force",
                 env=grading_environment(course, learner))


def read_result(course: Path, chapter: Path, learner: str) -> Result:
    """A learner's points per exercise from the gradebook, with zeros where the guard refused or a cell timed out."""
    from nbgrader.api import Gradebook

    name = assignment_name(chapter)
    result = Result(learner)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(chapter.stem, name, learner)
        for g in notebook.grades:
            match = CHECK_ID.match(g.name)
            if match is None:  # a written answer (`<label>-written-0`), graded by hand in nbgrader's formgrader
                continue
            label = match.group("label")
            result.scores[label] = result.scores.get(label, 0.0) + (g.score or 0.0)
    graded = nbformat.read(course / "autograded" / learner / name / chapter.name, as_version=4)
    for cell in graded.cells:
        match = CHECK_ID.match(cell.metadata.get("nbgrader", {}).get("grade_id", ""))
        if not match or cell.cell_type != "code":
            continue
        label, why = match.group("label"), zero_reason(cell.outputs)
        errors = [o.ename for o in cell.outputs if o.output_type == "error"]
        if not why and errors and _is_answer(cell) and result.scores.get(label):
            why = f"its answer cell raised {errors[0]}"  # a crash after the answer was set: the answer does not count
        if why and label in result.scores:
            result.scores[label] = 0.0
            result.notes.setdefault(label, why)
        failed = [o.evalue for o in cell.outputs if o.output_type == "error" and o.ename == "CheckFailed"]
        if failed and not _is_answer(cell):  # a plain wrong answer: what the check told the learner
            result.notes.setdefault(label, failed[0].splitlines()[0][:150])
    release = nbformat.read(course / "release" / name / chapter.name, as_version=4)
    for label, why in changes_to_the_grader(graded.cells, release.cells).items():
        result.scores[label], result.notes[label] = 0.0, why  # whatever its check said
    return result


_ONE_READING = threading.Lock()  # (see changes_to_the_grader)


def changes_to_the_grader(graded: list, release: list) -> dict[str, str]:
    """Exercise label -> why it scores 0: its answer cell changes what the checks use (tools/course/tampering.py), or
    an earlier answer did (it ran before this exercise's check). One learner at a time: Python 3.11's ast module
    keeps state that two threads building trees at once corrupt ("AST constructor recursion depth mismatch")."""
    with _ONE_READING:
        return _changes_to_the_grader(graded, release)


def _changes_to_the_grader(graded: list, release: list) -> dict[str, str]:
    code = [c for c in graded if c.cell_type == "code"]
    answers = [c for c in code if _is_answer(c)]
    checks = [c.source for c in code if c.metadata.get("nbgrader", {}).get("grade")]
    locked = [c.source for c in code if not _is_answer(c) and not c.metadata.get("nbgrader", {}).get("grade")]
    stubs = [c.source for c in release if _is_answer(c)]
    protected = protected_names(locked, checks, stubs)
    modules = module_names(locked + [c.source for c in answers])
    found: dict[str, str] = {}
    culprit = ""
    for cell in code:
        match = CHECK_ID.match(cell.metadata.get("nbgrader", {}).get("grade_id", ""))
        label = match.group("label") if match else ""  # "": a locked cell of the chapter, no exercise
        if culprit and label and label not in found:
            found[label] = f"not graded: the answer to {culprit} changes the grader before this check"
        reasons = tampering(cell.source, protected, modules) if _is_answer(cell) else []
        if reasons and label not in (culprit, ""):
            found[label] = "changes the grader: " + "; ".join(reasons[:3])
            culprit = culprit or label
    return found



def zero_reason(outputs: list) -> str:
    """Why a cell's exercise scores 0 whatever its check said: the guard refused something, or the cell timed out."""
    for output in outputs:
        if output.get("output_type") != "error":
            continue
        if GRADING_REFUSED in output.get("evalue", ""):
            return output["evalue"].split(": ", 1)[1]
        if output.get("ename") in ("CellTimeoutError", "KeyboardInterrupt"):  # nbgrader interrupts a slow cell
            return "timed out"
    return ""  # a dead kernel never reaches an output: grade_one regrades without the answer that killed it


def write_table(results: list[Result], points: dict[str, int], csv_path: Path) -> str:
    """Write the scores as CSV; return them as a Markdown table."""
    header = ["learner", *[f"{label} ({p})" for label, p in points.items()], f"total ({sum(points.values())})",
              "notes"]
    rows = []
    for r in results:
        cells = [r.scores.get(label, 0.0) for label in points]
        notes = "; ".join(f"{label}: {why}" for label, why in r.notes.items()) or r.failed
        rows.append([r.learner, *[f"{c:g}" for c in cells], f"{sum(cells):g}", notes])
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    out = io.StringIO()
    out.write("| " + " | ".join(header) + " |\n| " + " | ".join("---" for _ in header) + " |\n")
    for row in rows:
        out.write("| " + " | ".join(row) + " |\n")
    return out.getvalue()


def write_written(course: Path, chapter: Path, results: list[Result]) -> Path | None:
    """For a chapter with manually graded answers: `<course>/scores/chNN-written.csv`, the sheet for their points
    (gradebook.write_written_sheet), and `chNN-written.md`, every learner's answer question by question, to read
    while grading; return the sheet, or None if the chapter has no written answer."""
    written = written_answers(chapter)
    if not written:
        return None
    name, scores = assignment_name(chapter), course / "scores"
    sheet = scores / f"{name}-written.csv"
    write_written_sheet(sheet, [r.learner for r in results], written)
    titles = {e.label: f"{e.grade} {e.title}" for e in find_exercises(nbformat.read(chapter, as_version=4).cells)}
    answers = {grade_id: [] for grade_id in written}
    for r in results:
        graded = grading_folder(course, chapter) / "autograded" / r.learner / name / chapter.name
        cells = nbformat.read(graded, as_version=4).cells if graded.exists() else []
        given = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in cells}
        for grade_id in written:
            answers[grade_id].append(f"**{r.learner}**\n\n{given.get(grade_id, '(no answer cell)').strip()}\n")
    lines = [f"# {name}: written answers\n"]
    for grade_id, given in answers.items():
        label = grade_id.rsplit("-written-", 1)[0]
        lines += [f"## {grade_id} ({written[grade_id]} point{'s' * (written[grade_id] != 1)}): "
                  f"{titles.get(label, label)}\n", *given]
    (scores / f"{name}-written.md").write_text("\n".join(lines), encoding="utf-8")
    return sheet


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter", help="the chapter's number, e.g. 3 or 03")
    parser.add_argument("submissions", type=Path, help="folder of <learner>.ipynb or <learner>/<name>.ipynb")
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE)
    parser.add_argument("--timeout", type=int, default=180, help="seconds a cell may run (default 180)")
    parser.add_argument("--jobs", type=int, default=None, help="learners graded at a time (default: one per CPU)")
    args = parser.parse_args()
    chapter = chapter_path(args.chapter)
    results = grade(chapter, collect(args.submissions), args.course, args.timeout, args.jobs)
    csv_path = args.course / "scores" / f"{assignment_name(chapter)}.csv"
    print(write_table(results, graded_exercises(chapter), csv_path), end="")
    print(f"\nscores written to {csv_path}; graded notebooks in {grading_folder(args.course, chapter) / 'autograded'}")
    sheet = write_written(args.course, chapter, results)
    if sheet is not None:
        print(f"written answers to grade by hand: {sheet.with_suffix('.md')}; their points go in {sheet}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
