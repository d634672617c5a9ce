"""The structure of the book's exercises, read from a notebook: shared by tests/test_exercises.py and
tools/course/assignments.py and tools/course/slides.py.

An exercise is a gated sphinx-exercise block, so that its text stays ordinary Markdown in Jupyter and Colab:

    markdown  ```{exercise-start} ★★ Title            (grade ★, ★★ or ★★★; "Pencil and paper" in the title of the
              :label: chNN-ex-name                       exercises answered on paper)
              ```
    ...       the question (markdown) and, for a coding exercise, the learner's cells (stubs)
    markdown  ```{exercise-end}
              ```
    code      the check, tagged raises-exception: it runs on the learner's names and fails (tfm.check.CheckFailed)
              until the learner's answer is right; a pencil-and-paper exercise has none
    markdown  ```{solution-start} chNN-ex-name
              :class: dropdown
              ```
    ...       the solution: code that defines <name>_solution (never a learner's name) and runs the same check on it
    markdown  ... ```{solution-end}
              ```
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

START = re.compile(r"```\{exercise-start\} (★{1,3}) ([^\n]+)\n:label: (\S+)")


@dataclass
class Exercise:
    grade: str
    title: str
    label: str
    start: int  # cell indices
    end: int
    checks: list[int] = field(default_factory=list)
    solution: tuple[int, int] | None = None

    @property
    def on_paper(self) -> bool:
        return "Pencil and paper" in self.title


def is_marker(cell, name: str) -> bool:
    return cell["cell_type"] == "markdown" and f"{{{name}}}" in "".join(cell["source"])


def tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def find_exercises(cells: list) -> list[Exercise]:
    """Every gated exercise of a notebook, with its check cells and its solution (cell index ranges)."""
    found = []
    for i, cell in enumerate(cells):
        match = START.search("".join(cell["source"])) if cell["cell_type"] == "markdown" else None
        if not match:
            continue
        end = next(k for k in range(i + 1, len(cells)) if is_marker(cells[k], "exercise-end"))
        exercise = Exercise(match.group(1), match.group(2), match.group(3), i, end)
        k = end + 1
        while k < len(cells) and not is_marker(cells[k], "solution-start") and not START.search(
                "".join(cells[k]["source"])):
            if cells[k]["cell_type"] == "code" and "raises-exception" in tags(cells[k]):
                exercise.checks.append(k)
            k += 1
        if k < len(cells) and is_marker(cells[k], "solution-start"):
            stop = next(m for m in range(k, len(cells)) if is_marker(cells[m], "solution-end"))
            exercise.solution = (k, stop)
        found.append(exercise)
    return found


def in_solutions(cells: list) -> set[int]:
    """Indices of the cells inside gated solutions (markers included)."""
    inside, indices = False, set()
    for i, cell in enumerate(cells):
        if is_marker(cell, "solution-start"):
            inside = True
        if inside:
            indices.add(i)
        if is_marker(cell, "solution-end"):
            inside = False
    return indices


def parse_cell(source: str) -> ast.Module:
    """A code cell as Python: as it stands if it parses (a line that starts with % may continue an expression,
    `x = (a\n % 7)`), else with its IPython magic and shell lines (those starting with % or !) left out. The one
    reading of a cell that the book's tools and the grader share; a cell that is not Python either way raises
    SyntaxError."""
    try:
        return ast.parse(source)
    except SyntaxError:
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        return ast.parse("\n".join(lines))


def bound_names(source: str) -> set[str]:
    """Names a cell binds at top level (functions, classes, assignments, imports, loop and with targets)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            return  # names inside a function or class body are local
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(parse_cell(source))
    return names


def used_names(source: str) -> set[str]:
    """Every name a cell reads."""
    return {n.id for n in ast.walk(parse_cell(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def called_names(source: str) -> set[str]:
    """Names of the functions a cell calls (``f(...)`` and ``obj.f(...)`` give ``f``)."""
    called = set()
    for node in ast.walk(parse_cell(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
    return called - {""}
