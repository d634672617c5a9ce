"""tools/course/needed_cells.py: grading runs the cells the checks depend on, and leaves out the others."""

from __future__ import annotations

import ast

import pytest

from tools.course.needed_cells import needed_cells

CELLS = [
    "import torch\nimport matplotlib.pyplot as plt",                      # 0 imports: kept
    "model = torch.nn.Linear(2, 2)",                                        # 1 binds model: kept
    "history = [model(torch.randn(2)).sum() for _ in range(3)]",            # 2 only reads model: left out
    "fig, ax = plt.subplots()\nax.plot(history)",                            # 3 a figure: left out
    "model.load_state_dict({'weight': torch.eye(2), 'bias': torch.zeros(2)})",  # 4 changes model: kept
    "def helper(x):\n    return x * scale",                                  # 5 defines helper, reads scale: kept
    "scale = 2.0",                                                           # 6 binds scale, read by helper: kept
    "print(len(history))",                                                   # 7 reads history only: left out
    "def check(fn):\n    y = fn(torch.ones(2))\n    assert torch.equal(y, helper(model(torch.ones(2))))",  # 8 check
    "def answer(x):\n    return 2 * model(x)",                               # 9 the learner's answer
    "check(answer)",                                                         # 10 the graded check
]


def test_cells_a_check_depends_on_are_kept_and_the_rest_left_out():
    kept = needed_cells(CELLS, required={9, 10})
    assert kept == {0, 1, 4, 5, 6, 8, 9, 10}, sorted(kept)


def test_a_cell_that_cannot_be_parsed_is_kept_and_bad_indices_are_named():
    assert 1 in needed_cells(["x = 1", "this is (not python", "print(2)"], required={2})
    with pytest.raises(ValueError, match=r"required cells \[5\] are not among the 3 cells"):
        needed_cells(["a = 1", "b = 2", "c = 3"], required={5})


def test_a_local_name_of_a_function_is_not_wanted_from_earlier_cells():
    cells = ["x = 1", "def f(y):\n    x = y + 1\n    return x", "f(2)"]
    assert needed_cells(cells, required={2}) == {1, 2}


def test_a_line_that_continues_an_expression_with_modulo_is_python_not_a_magic():
    # `(a\n % 7)` parses as it stands; only a cell that is not Python has its % and ! lines read as IPython's
    from tools.course.tampering import _parse

    continued = "x = 3\norder = (x * 2\n         % 7) / 7\n"
    assert _parse(continued) is not None and "order" in {n.id for n in ast.walk(_parse(continued))
                                                          if isinstance(n, ast.Name)}
    assert needed_cells(["data = 1", "def f(y):\n    return (y * data\n            % 7)", "f(2)"], {2}) == {0, 1, 2}
    magic = "%matplotlib inline\nx = 1\n"
    assert _parse(magic) is not None  # the magic line dropped, the rest read
