"""The student edition keeps no solution and no output (or, for `make test`, exactly the book's outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tools.book.student_edition import write_student_edition

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


def solution_code(path: Path) -> list[str]:
    """Source of every code cell inside a gated solution of the original notebook."""
    inside, found = False, []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and "{solution-start}" in text:
            inside = True
        elif cell["cell_type"] == "markdown" and "{solution-end}" in text:
            inside = False
        elif inside and cell["cell_type"] == "code":
            found.append(text)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_solution_survives(path, tmp_path):
    student = nbformat.read(write_student_edition(path, tmp_path), as_version=4)
    solutions = solution_code(path)
    assert solutions, f"{path.name} has no gated solutions to remove"
    for cell in student.cells:
        assert "{solution" not in cell.source, f"{path.name}: a solution directive survived"
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: an output survived"
            assert cell.source not in solutions, f"{path.name}: solution code survived:\n{cell.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_kept_outputs_are_the_books(path, tmp_path):
    """`--keep-outputs` (make test's student pass) leaves every remaining cell exactly as the book stores it, outputs
    and execution counts included, so that nbval compares each of them with the book's outputs."""
    full = nbformat.read(path, as_version=4)
    student = nbformat.read(write_student_edition(path, tmp_path, keep_outputs=True), as_version=4)
    solutions = set(solution_code(path))
    kept = [c for c in full.cells if not (c.cell_type == "code" and c.source in solutions)
            and "{solution" not in c.source]
    code = [c for c in student.cells if c.cell_type == "code"]
    assert code == [c for c in kept if c.cell_type == "code"], f"{path.name}: a kept cell or its outputs changed"
    assert any(c.outputs for c in code) and all(c.execution_count is not None for c in code if c.source.strip())
