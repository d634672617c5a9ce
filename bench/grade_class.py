"""Grade a synthetic class with `make grade`'s code, and time it: how long one chapter takes for a class of 40.

Usage: python bench/grade_class.py CHAPTER [--learners 40] [--jobs N]      (e.g. `python bench/grade_class.py 07`)

The class is built from the chapter's assignment: a third of the learners hand in the instructor's version (every
answer right), a third the release untouched (every answer empty) and a third every other answer right. Each is
graded by tools/course/grade.py as `make grade` does (learners side by side, --jobs, one per core by default); the
script checks that each learner scores what their answers deserve (full marks, 0, and the right half's points) and
prints the wall time with the machine's speed. `--learners 1` grades the instructor's version alone: the check
before handing an assignment out. Timing is reported, never asserted; a wrong score exits 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.time_test import gflops  # noqa: E402
from tools.course import grade  # noqa: E402
from tools.course.assignments import assignment_name, graded_exercises, write_course  # noqa: E402

KINDS = ("right", "empty", "half")


def submissions(chapter: Path, learners: int, folder: Path) -> dict[str, int]:
    """Write the class's notebooks into `folder`; return each learner's deserved points."""
    course = folder / "course"
    write_course(course, [chapter])
    name = assignment_name(chapter)
    source = nbformat.read(course / "source" / name / chapter.name, as_version=4)
    release = nbformat.read(course / "release" / name / chapter.name, as_version=4)
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells if grade._is_answer(c)}
    points = graded_exercises(chapter)
    kept = set(list(points)[::2])  # the exercises the "half" learners answer
    deserved = {}
    for n in range(learners):
        kind = KINDS[n % len(KINDS)]
        nb = nbformat.from_dict(source if kind != "empty" else release)
        if kind == "half":
            for cell in nb.cells:
                gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
                if grade._is_answer(cell) and gid.rsplit("-answer-", 1)[0] not in kept:
                    cell.source = stubs[gid]
        learner = f"{kind}-{n:02d}"
        nbformat.write(nb, folder / "class" / f"{learner}.ipynb")
        deserved[learner] = {"right": sum(points.values()), "empty": 0,
                             "half": sum(points[label] for label in kept)}[kind]
    return deserved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter", help="the chapter's number, e.g. 03")
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=None, help="learners graded at a time (default: one per CPU)")
    args = parser.parse_args()
    chapter = grade.chapter_path(args.chapter)
    with tempfile.TemporaryDirectory(prefix="tfm-class-") as tmp:
        folder = Path(tmp)
        (folder / "class").mkdir()
        deserved = submissions(chapter, args.learners, folder)
        speed = gflops()
        start = time.perf_counter()
        results = grade.grade(chapter, grade.collect(folder / "class"), folder / "grading", jobs=args.jobs)
        seconds = time.perf_counter() - start
    wrong = {r.learner: (sum(r.scores.values()), deserved[r.learner], r.failed or r.notes)
             for r in results if r.failed or sum(r.scores.values()) != deserved[r.learner]}
    print(f"{chapter.name}: {len(results)} learners graded in {seconds:.0f} s ({seconds / 60:.1f} min, "
          f"{seconds / len(results):.1f} s per learner), {args.jobs or 'one per CPU'} at a time; machine "
          f"{speed:.0f} GFLOP/s before")
    if wrong:
        print(f"scores not as deserved (got, deserved, note): {wrong}")
        return 1
    print("every learner scored what their answers deserve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
