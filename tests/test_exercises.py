"""Every chapter's exercises have the same shape: a graded, labelled exercise, a cell for the learner, a hidden
solution (a dropdown on the website), and then a self-check cell that says what is wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
EXERCISE = re.compile(r"```\{exercise\} (★{1,3}) .+\n:label: (\S+)")


def exercises(path: Path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for i, cell in enumerate(cells):
        match = EXERCISE.search("".join(cell["source"])) if cell["cell_type"] == "markdown" else None
        if match:
            yield match.group(1), match.group(2), cells, i


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_are_graded_hidden_and_self_checked(path):
    found = list(exercises(path))
    assert len(found) >= 3, f"{path.name}: fewer than three exercises"
    assert {grade for grade, *_ in found} >= {"★", "★★", "★★★"}, f"{path.name}: needs ★, ★★ and ★★★ exercises"
    labels = [label for _, label, *_ in found]
    assert len(set(labels)) == len(labels), f"{path.name}: duplicate exercise labels {labels}"
    for _, label, cells, i in found:
        opening = "".join(cells[i]["source"]).split("\n", 1)[0]
        assert "`" not in opening.lstrip("`"), (
            f"{path.name}: the title of {label} contains a backtick; CommonMark then does not read the fence as a "
            "directive, so the exercise vanishes from the website (write the title without inline code)"
        )
        rest = ["".join(c["source"]) for c in cells[i + 1 :]]
        start = next((k for k, s in enumerate(rest) if "{solution-start}" in s), None)
        assert start is not None, f"{path.name}: exercise {label} has no solution"
        assert f"{{solution-start}} {label}" in rest[start], f"{path.name}: the solution after {label} is not its own"
        assert ":class: dropdown" in rest[start], f"{path.name}: the solution of {label} is not hidden"
        end = next(k for k in range(start, len(rest)) if "{solution-end}" in rest[k])
        check = next((k for k in range(end + 1, len(rest)) if cells[i + 1 + k]["cell_type"] == "code"), None)
        assert check is not None, f"{path.name}: exercise {label} has no self-check cell after its solution"
        assert re.search(r"check|assert ", rest[check]), f"{path.name}: the check of {label} checks nothing"
