"""The cells a chapter's grading needs: grade.py runs only those, so that a class is graded in minutes.

Grading a submission runs the notebook top to bottom, and in a training chapter most of that time goes to cells no
exercise check reads: the training behind a figure, the figure itself, a printed table. Python's parser (no code is
run) tells which cells the checks depend on. Walking from the last cell to the first, a cell is needed when

- it is an answer, a check or the chapter's setup (the cells the caller names), or
- it imports a module or could not be parsed (kept, to be safe), or
- it binds or changes a name that a needed cell after it reads (module names aside: every cell uses `torch`): it
  assigns the name, assigns to an attribute or item of it, or calls a method of it (`model.load_state_dict(...)`,
  `optimizer.step()`).

The names a needed cell reads (builtins aside) are then wanted from the cells before it; those that its functions'
bodies read are wanted from every cell, since a function reads them when it is called, later. A cell that only
passes a name to a function is taken to read it, not to change it: a cell that trained, through a function, a model
it did not create would be left out, and the instructor's version would lose points. So the rule is checked where
it matters: the instructor's version of every chapter earns full marks graded this way (`python bench/grade_class.py
NN --learners 1`; tests/test_grading.py for chapter 1). The checks draw their own inputs, so a left-out cell that drew
random numbers or set a seed changes nothing they compare. What it leaves out, the grader replaces by a comment
(`SKIPPED`), in the grading folder only: the notebooks handed out and the book are untouched.
"""

from __future__ import annotations

import ast
import builtins

from tools.course.tampering import _parse, bound_names, loaded_names, module_names

BUILTINS = set(dir(builtins))

SKIPPED = "# Not run when graded: no exercise check depends on this cell (tools/course/needed_cells.py)."


def needed_cells(sources: list[str], required: set[int]) -> set[int]:
    """The indices of the code cells (given as their sources, in notebook order) that grading must run: `required`
    and every cell that a required cell depends on, by the rule of the module docstring."""
    if not required <= set(range(len(sources))):
        raise ValueError(f"required cells {sorted(required - set(range(len(sources))))} are not among the "
                         f"{len(sources)} cells")
    ignored = set(module_names(sources)) | BUILTINS
    trees = [_parse(source) for source in sources]
    called_later: set[str] = set()  # read inside functions: wanted from any cell, since they are read when called
    while True:
        keep, wanted = set(), set(called_later)
        for k in reversed(range(len(sources))):
            tree = trees[k]
            imports = tree is None or any(isinstance(n, ast.Import | ast.ImportFrom) for n in ast.walk(tree))
            if k in required or imports or changed_names(tree) & wanted:
                keep.add(k)
                if tree is not None:
                    wanted |= free_names(tree) - ignored
        in_bodies = set().union(*(free_names(trees[k], bodies_only=True) for k in keep if trees[k] is not None))
        if in_bodies - ignored <= called_later:
            return keep
        called_later |= in_bodies - ignored


def changed_names(tree: ast.Module) -> set[str]:
    """The names a cell binds or changes at its top level: assigned, an attribute or item of them assigned, or a
    method of them called (`x.add_(1)`, `model.train()`); what the bodies of functions it defines do happens when
    they are called, elsewhere."""
    found = bound_names(tree)
    for node in _top_level_nodes(tree):
        targets = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            targets = [node.func.value]
        found |= {root for target in targets if (root := _receiver(target)) is not None}
    return found


def _receiver(node: ast.AST) -> str | None:
    """The name whose object an assignment or a method call changes: `model` in `model.layers[0].weight`; none in
    `model(x).sum()`, which changes a new tensor."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _top_level_nodes(tree: ast.Module):
    """Every node of the cell outside the bodies of the functions, classes and lambdas it defines."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def free_names(tree: ast.Module, bodies_only: bool = False) -> set[str]:
    """The names a cell reads from the notebook's namespace: at its top level (unless `bodies_only`), and in the
    bodies of the functions and classes it defines those that the function or class does not bind itself (its
    arguments, its locals)."""
    found: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = bound_names(statement, top_level_only=False) - {statement.name}
            found |= {name for name in loaded_names(statement) if name not in inner}
        elif not bodies_only:
            found |= loaded_names(statement)
    return found
