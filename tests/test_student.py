"""The student edition keeps no solution and no output, and each student notebook runs up to its first exercise."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from student_edition import write_student_edition  # noqa: E402

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
def test_student_notebook_runs_up_to_its_first_exercise(path, tmp_path):
    """Up to its first exercise, the student notebook is the full notebook cell for cell, so the nbval run of the full
    notebook (`make notebooks`) has executed exactly what a student runs first: no second execution is needed."""
    full = nbformat.read(path, as_version=4)
    student = nbformat.read(write_student_edition(path, tmp_path), as_version=4)

    def first_exercise(nb) -> int:
        return next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "{exercise-start}" in c.source)

    cut = first_exercise(full)
    assert first_exercise(student) == cut, f"{path.name}: the student edition changed cells before the first exercise"
    for mine, theirs in zip(student.cells[:cut], full.cells[:cut], strict=True):
        assert (mine.cell_type, mine.source) == (theirs.cell_type, theirs.source)
    assert not any("{solution" in c.source for c in full.cells[:cut]), f"{path.name}: a solution before the exercises"
