"""The workshop's layout (tools/): every script sits in a folder named for its concern, each folder says what it holds,
and the imports between the tools' modules form no circle (read from the source, nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
CONCERNS = {"book", "course", "figures", "corpus"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def tools_imports(path: Path) -> set[str]:
    """The tools modules that `path` imports (`from tools.x import y` counts tools.x.y when that is a module)."""
    known = {module_name(p) for p in TOOLS.rglob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known and name != "tools"}


def test_every_script_sits_in_a_folder_named_for_its_concern():
    loose = [p.name for p in TOOLS.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"scripts directly in tools/: {loose}; put each in {sorted(CONCERNS)}"
    folders = {p.name for p in TOOLS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == CONCERNS, f"tools/ holds {sorted(folders)}, expected {sorted(CONCERNS)}"
    for folder in folders:
        init = TOOLS / folder / "__init__.py"
        assert init.is_file(), f"tools/{folder}/ has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc.split()) >= 20, f"tools/{folder}/__init__.py does not say what the folder holds"
        for script in (TOOLS / folder).glob("*.py"):
            if script.name not in ("__init__.py", "__main__.py"):
                assert script.stem in doc, f"tools/{folder}/__init__.py does not mention {script.name}"


def test_imports_inside_tools_form_no_circle():
    graph = {module_name(p): tools_imports(p) - {module_name(p)} for p in TOOLS.rglob("*.py")}
    assert any(graph.values()), "no imports between tools modules found: the reader is broken"
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for child in sorted(graph.get(node, ())):
            if state.get(child) == "open":
                cycle = path[path.index(child):] + [child] if child in path else [node, child]
                raise AssertionError(f"import circle: {' -> '.join(cycle)}")
            if child not in state:
                visit(child, [*path, child])
        state[node] = "done"

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])


def test_course_depends_on_book_never_the_reverse():
    for path in (TOOLS / "book").rglob("*.py"):
        wrong = {m for m in tools_imports(path) if not m.startswith("tools.book")}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}: tools/book imports only itself"
    for path in (TOOLS / "figures").rglob("*.py"):
        wrong = {m for m in tools_imports(path) if not m.startswith("tools.figures")}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"
