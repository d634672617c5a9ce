"""Run the student edition as a learner would and require every exercise check to fail on its untouched stubs.

Usage: python tools/check_student_edition.py [chapters/NN_*.ipynb ...]   (part of `make test`)

Each notebook's student edition (tools/student_edition.py: no solutions, no outputs) is executed top to bottom in the
book's environment. Every cell must run as in the full edition except the exercise checks (tools/exercises.py), and
each of those must fail with tfm.check.CheckFailed: a check that passes on an empty answer, or a cell that only works
with a solution's names, fails this run. Prints one line per notebook; exits 1 if any notebook fails.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat
from exercises import find_exercises
from nbclient.exceptions import CellExecutionError
from notebooks import execute, notebooks
from student_edition import write_student_edition


def check(path: Path, folder: Path) -> list[str]:
    """Problems found in the student edition of ``path`` (an empty list when every check fails as it should)."""
    nb = nbformat.read(write_student_edition(path, folder), as_version=4)
    try:
        execute(nb, folder)
    except CellExecutionError as error:  # a cell outside the checks failed
        return [f"a cell that is not an exercise check failed: {str(error).splitlines()[-1]}"]
    problems = []
    for exercise in find_exercises(nb.cells):
        for k in exercise.checks:
            errors = [o for o in nb.cells[k].outputs if o.output_type == "error"]
            if not errors or errors[0].ename != "CheckFailed":
                got = errors[0].ename if errors else "no error"
                problems.append(f"the check of {exercise.label} did not fail with CheckFailed ({got})")
    return problems


def main() -> int:
    paths = [Path(p) for p in sys.argv[1:]] or notebooks()
    failed = False
    with tempfile.TemporaryDirectory() as scratch:
        for path in paths:
            folder = Path(scratch) / path.stem
            folder.mkdir()
            problems = check(path, folder)
            checks = sum(len(e.checks) for e in find_exercises(nbformat.read(path, as_version=4).cells))
            verdict = "FAILED" if problems else f"ok, all {checks} exercise checks fail on the untouched stubs"
            print(f"{path.name}: {verdict}", flush=True)
            for problem in problems:
                print(f"  - {problem}")
            failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
