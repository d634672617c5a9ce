"""Write the student edition: each notebook without its solutions.

Usage: python -m tools.book.student_edition --out student chapters/*.ipynb                  (`make student`)
       python -m tools.book.student_edition --keep-outputs --out DIR chapters/*.ipynb     (`make test`)

A solution is everything from a markdown cell that opens with a ```{solution-start} directive to the cell that holds
the matching ```{solution-end}, inclusive, and any ```{solution} directive block inside a markdown cell. The learner's
stub cells and the self-check cells after each solution stay, so the student runs the check against their own code.

The edition handed out has no outputs. With --keep-outputs every remaining cell keeps the book's stored outputs:
`make test` runs that copy under strict nbval on a second numeric path, so one execution proves that the student
edition runs without the solutions, that every exercise check still fails on its stub exactly as stored (the stored
CheckFailed error is compared like any output), and that every other cell gives the book's outputs on another path.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

SOLUTION_BLOCK = re.compile(r"(`{3,}|:{3,})\{solution\}.*?\n\1[ \t]*(\n|$)", re.S)


def is_marker(cell, name: str) -> bool:
    return cell.cell_type == "markdown" and f"{{{name}}}" in cell.source


def student_cells(cells: list, keep_outputs: bool = False) -> list:
    kept, inside = [], False
    for cell in cells:
        if not inside and is_marker(cell, "solution-start"):
            inside = True
        if inside:
            if is_marker(cell, "solution-end"):
                inside = False
            continue
        if cell.cell_type == "markdown":
            cell.source = SOLUTION_BLOCK.sub("", cell.source)
        if cell.cell_type == "code" and not keep_outputs:
            cell.outputs, cell.execution_count = [], None
        kept.append(cell)
    if inside:
        raise ValueError("a solution-start has no matching solution-end")
    return kept


def write_student_edition(path: Path, out_dir: Path, keep_outputs: bool = False) -> Path:
    nb = nbformat.read(path, as_version=4)
    try:
        nb.cells = student_cells(nb.cells, keep_outputs)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / path.name
    nbformat.write(nb, target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("student"))
    parser.add_argument("--keep-outputs", action="store_true", help="keep the book's stored outputs (for nbval)")
    args = parser.parse_args()
    for path in args.notebooks:
        print(f"{write_student_edition(path, args.out, args.keep_outputs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
