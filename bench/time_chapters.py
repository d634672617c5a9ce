"""Time each chapter's notebook, executed top to bottom once, against its budget, and the whole book against
its own (`tools/book/notebooks.py`, BUDGETS and BOOK_BUDGET).

Usage: python bench/time_chapters.py [chapters/NN_x.ipynb ...]   (part of `make bench`)

Budgets are checked here, not in the notebooks: a notebook asserts what is true, and a slow machine is not wrong.
The notebooks are executed from copies, so their stored outputs are left alone. Exits 1 if a chapter is over budget.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: its tools/ package
from tools.book.notebooks import BOOK_BUDGET, BUDGETS, execute, notebooks  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.notebooks or notebooks()
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs\n")
    print("| chapter | budget | measured | |\n| --- | ---: | ---: | --- |")
    total, over = 0.0, []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as folder:
            seconds = execute(nb, Path(folder))
        budget = BUDGETS[path.stem]
        total += seconds
        if seconds > budget:
            over.append(path.stem)
        print(f"| {path.stem} | {budget} s | {seconds:.1f} s | {'OVER' if seconds > budget else 'ok'} |", flush=True)
    if not args.notebooks and total > BOOK_BUDGET:
        over.append(f"the whole book ({BOOK_BUDGET} s)")
    print(f"\nwhole book: {total:.0f} s (budget {BOOK_BUDGET} s); over budget: {', '.join(over) or 'none'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
