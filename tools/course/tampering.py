"""Answer cells that change the grader instead of answering: found by reading their code, before any score counts.

nbgrader puts back the instructor's version of every locked and test cell before it grades, but it runs the notebook
in one kernel: a learner's answer cell runs before the checks and can replace what they call. Two lines at the top
of an empty submission, `check_mha = lambda *a, **k: None` and `tfm.check.check_answer = lambda *a, **k: None`,
would pass every check. A learner's answer needs none of what that takes, so tools/course/grade.py reads the
submitted answer cells (Python's own parser, no code is run) and an exercise whose answer does any of the following
scores 0, with every exercise after it (its code ran before their checks), and a note naming what it did:

- binds, at the top level of the notebook (or through `global`), a name that a check reads and that the chapter's
  locked cells define, not the exercise's stub: a check function, a reference result, `tfm`;
- assigns to, deletes or mutates in place (`x.add_(...)`, `x.data`) an attribute or an item of such a name or of a
  module (`tfm.check.check_answer = ...`, `torch.allclose = ...`, `W_K[0] = 0`);
- reaches the grader's or the notebook's machinery: `setattr`, `delattr`, `globals`, `locals`, `vars`, `exec`,
  `eval`, `compile`, `__import__`, `open`, IPython's history (`In`, `Out`, `_ih`, `_i1`...), `get_ipython`, function
  internals (`__code__`, `__globals__`, `__dict__`...), modules that inspect or patch the interpreter (`sys`,
  `builtins`, `importlib`, `inspect`, `gc`), threads, signals and native code (`threading`, `concurrent`,
  `signal`, `ctypes`; files and processes are the grading guard's, at run time), a library's private parts
  (`torch._C`, `torch.utils._python_dispatch`), an attribute named at run time (`getattr(x, name)`,
  `getattr(m, "__dict__")`), or the notebook's own file (`.ipynb`, `read_text`, `nbformat`, `json`);
- holds an IPython magic or a shell line (`%run`, `%%bash`, `!...`): such a line can run code this reading cannot see.

This is a classroom guard, like grading_guard.py: it stops the shortcuts a learner finds in a minute (the three in
tests/test_grading.py), not a determined attacker; grade untrusted work in a container and read flagged notebooks.
"""

from __future__ import annotations

import ast
import re

from tools.book.exercises import parse_cell

FORBIDDEN_CALLS = {"setattr", "delattr", "globals", "locals", "vars", "exec", "eval", "compile", "__import__", "open",
                   "get_ipython", "breakpoint", "__builtins__"}
HISTORY = re.compile(r"^(In|Out|_ih|_oh|_dh|_i+|_i\d+|_\d+|__+)$")  # IPython's record of the notebook's cells
INTERNALS = {"__code__", "__globals__", "__builtins__", "__closure__", "__defaults__", "__kwdefaults__",
             "__setattr__", "__delattr__", "__subclasses__", "__mro__", "__bases__", "__getattribute__", "f_globals",
             "f_locals", "f_back", "read_text", "read_bytes", "sys", "setprofile", "settrace", "REFUSING"}
IN_PLACE = re.compile(r"[a-z]\w*[a-z0-9]_")  # torch's in-place methods and initialisers end in one underscore
FORBIDDEN_MODULES = {"sys", "builtins", "importlib", "inspect", "gc", "nbformat", "json", "IPython", "traceback",
                     "pickle", "marshal", "types", "threading", "_thread", "concurrent", "multiprocessing", "signal",
                     "_signal", "ctypes", "resource"}
CHECKED_LIBRARIES = {"torch", "tfm", "numpy"}  # whose private parts (torch._C) reach under a check's refusals


def bound_names(tree: ast.AST, top_level_only: bool = True) -> set[str]:
    """The names a piece of code binds in the notebook's namespace (its top level, unless ``top_level_only`` is
    False): assignments, loop and `with` targets, definitions, imports and `global` declarations."""
    found: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.Global):
            found.update(node.names)
        if top or not top_level_only:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                found.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                found.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.arg) and not top_level_only:
                found.add(node.arg)
        inner = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
                                       | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, True)
    return found


def module_names(sources: list[str]) -> dict[str, str]:
    """The names that cells bind to modules, with the module (`import torch.nn as nn`: nn -> torch.nn, `import
    tfm.check`: tfm -> tfm, `from torch import nn`: nn -> torch.nn, which may be a module or not)."""
    names: dict[str, str] = {}
    for node in (n for t in map(_parse, sources) if t is not None for n in ast.walk(t)):
        if isinstance(node, ast.Import):
            names.update({a.asname: a.name for a in node.names if a.asname})
            names.update({a.name.split(".")[0]: a.name.split(".")[0] for a in node.names if not a.asname})
        elif isinstance(node, ast.ImportFrom):
            names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return names


def loaded_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _parse(source: str) -> ast.AST | None:
    try:  # the book's one reading of a cell (tools.book.exercises.parse_cell)
        return parse_cell(source)
    except SyntaxError:
        return None  # the cell fails when it runs, and its exercise with it


def _as_ipython_runs(source: str) -> ast.AST | None:
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None


def protected_names(locked: list[str], checks: list[str], stubs: list[str]) -> set[str]:
    """The names a learner's answer must leave alone: read by a check cell or by a function of the locked cells that a
    check calls (its check helper, and the helpers and results that one reads), defined by a locked cell, and not
    defined by any exercise's stub (which the learner is asked to replace)."""
    locked_trees = [t for t in map(_parse, locked) if t is not None]
    functions = {node.name: node for t in locked_trees for node in ast.walk(t)
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    read = set().union(*(loaded_names(t) for t in map(_parse, checks) if t is not None))
    todo = [name for name in read if name in functions]
    while todo:  # what the called helpers read from the notebook, and what the helpers they call read
        function = functions[todo.pop()]
        for name in loaded_names(function) - bound_names(function, top_level_only=False) - read:
            read.add(name)
            if name in functions:
                todo.append(name)
    defined = set().union(*(bound_names(t) for t in locked_trees))
    stubbed = set().union(*(bound_names(t) for t in map(_parse, stubs) if t is not None))
    return (defined & read) - stubbed


def _named_at_run_time(call: ast.Call, guarded: set[str]) -> bool:
    """`getattr(obj, name)` reaching what an attribute could not: a private or forbidden name given as a string, or
    any computed name on a module or a name the checks use (`getattr(tfm.check, "__di" + "ct__")`); a loop over the
    attributes of the learner's own objects (`getattr(model, name)`) is an answer's business."""
    name = call.args[1]
    if isinstance(name, ast.Constant):
        value = name.value
        return not (isinstance(value, str) and value.isidentifier() and not value.startswith("_")
                    and value not in FORBIDDEN_CALLS)
    return _root(call.args[0]) in guarded | {"__builtins__"}


def tampering(source: str, protected: set[str], modules: dict[str, str]) -> list[str]:
    """What an answer cell does to the grader (see the module docstring): one short reason per finding, in the
    order of the code; [] for an honest answer. ``modules``: the names the locked cells bind to modules (an answer
    may import them again under the same names)."""
    reasons: list[str] = []

    def say(reason: str) -> None:
        if reason not in reasons:
            reasons.append(reason)

    # An IPython magic or shell line can run any code (`%run`, `%%bash`, `!python -c ...`) that this reading of the
    # Python cannot see: no answer of the book needs one, so one is itself a finding.
    magics = [line.strip() for line in source.splitlines() if line.lstrip().startswith(("%", "!"))]
    if magics:
        say(f"runs an IPython magic or a shell line ({magics[0][:40]}), which the grader cannot read")
    tree = _parse(source)
    runs = _as_ipython_runs(source)  # what IPython makes of the cell before Python sees it
    if runs is not None and (tree is None or ast.dump(runs) != ast.dump(tree)):
        say("holds IPython syntax (a magic, a shell line, a help query), which runs code the grader cannot read")
        tree = runs  # read what runs (`_ = %pwd` is get_ipython().run_line_magic(...)), so nothing hides behind it
    if tree is None:
        return reasons

    own_imports = module_names([source])
    guarded = protected | set(modules) | set(own_imports)
    again = {name for name, module in own_imports.items() if modules.get(name) == module}  # `import math` again
    local: dict[int, set[str]] = {}  # id(node) -> the names bound in the function around it
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            own = bound_names(function, top_level_only=False) - {getattr(function, "name", "")}
            own -= {n for g in ast.walk(function) if isinstance(g, ast.Global) for n in g.names}
            for node in ast.walk(function):
                local[id(node)] = local.get(id(node), set()) | own
    assigned = bound_names(tree) - again | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                                            and isinstance(n.ctx, ast.Store | ast.Del) and n.id in again}
    dict_changes = {_root(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)  # x.__dict__.update(...)
                    and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Attribute)
                    and n.func.value.attr == "__dict__"} & guarded
    for name in sorted(assigned & protected):
        say(f"rebinds {name}, which the checks use")
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:  # the outermost target only (`a.b.c = ...` changes a.b.c, reported once)
            for part in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                outside = guarded - local.get(id(part), set())  # names of the notebook, not of a function
                if isinstance(part, ast.Attribute | ast.Subscript) and _root(part) in outside:
                    say(f"changes {ast.unparse(part)}, which the checks use")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and IN_PLACE.fullmatch(node.func.attr):  # x.add_(1), nn.init.zeros_(x): torch's in-place calls
            for changed in (node.func.value, *node.args):
                if _root(changed) in protected - local.get(id(node), set()):
                    say(f"changes {ast.unparse(changed)} in place ({node.func.attr}), which the checks use")
        if isinstance(node, ast.Name) and (node.id in FORBIDDEN_CALLS or HISTORY.match(node.id)):
            say(f"uses {node.id}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) > 1 and _named_at_run_time(node, guarded - local.get(id(node), set())):
            say(f"uses {ast.unparse(node)[:40]}, an attribute named at run time")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and {**modules, **own_imports}.get(_root(node), "").split(".")[0] in CHECKED_LIBRARIES:
            say(f"uses {ast.unparse(node)[:40]}, a library's private part")
        elif isinstance(node, ast.Attribute) and (node.attr in INTERNALS or node.attr == "data"
                                                  and _root(node) in protected - local.get(id(node), set())
                                                  or node.attr == "__dict__" and _root(node) in dict_changes):
            say(f"uses {ast.unparse(node)}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [f"{node.module or ''}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) \
                else [a.name for a in node.names]  # (from torch import _C: torch._C)
            for name in names:
                if name.split(".")[0] in FORBIDDEN_MODULES:
                    say(f"imports {name}")
                elif name.startswith("_"):  # _posixsubprocess, _ctypes: what the public modules guard
                    say(f"imports {name.split('.')[0]}, a private module")
                elif any(part.startswith("_") for part in name.split(".")) \
                        and name.split(".")[0] in CHECKED_LIBRARIES:
                    say(f"imports {name}, a library's private part")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ".ipynb" in node.value:
            say("reads a notebook file")
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in sorted(set(node.names) & protected):
                say(f"declares {name} global, which the checks use")
    return reasons
