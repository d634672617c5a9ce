"""tools/course/tampering.py: the answers that change the grader are found, the book's own solutions are not.

The end-to-end version (three gaming submissions graded with nbgrader, each scoring 0 for what it faked) is in
tests/test_grading.py; here the reading of the code is tested on every chapter, without running anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.course.assignments import source_notebook
from tools.course.tampering import module_names, protected_names, tampering

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def _parts(chapter: Path):
    """(answers with the book's solutions, protected names, module names) of a chapter's instructor version."""
    cells = [c for c in source_notebook(chapter).cells if c.cell_type == "code"]
    meta = [c.metadata.get("nbgrader", {}) for c in cells]
    answers = [c.source for c, m in zip(cells, meta, strict=True) if m.get("solution")]
    checks = [c.source for c, m in zip(cells, meta, strict=True) if m.get("grade")]
    locked = [c.source for c, m in zip(cells, meta, strict=True) if not m.get("solution") and not m.get("grade")]
    stubs = [a.split("### BEGIN SOLUTION")[0] for a in answers]
    return answers, protected_names(locked, checks, stubs), module_names(locked + answers)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name[:2])
def test_the_books_solutions_do_not_change_the_grader(chapter):
    answers, protected, modules = _parts(chapter)
    assert "tfm" in protected or "tfm" in modules
    flagged = {a.split("\n")[0][:60]: tampering(a, protected, modules) for a in answers}
    assert not any(flagged.values()), {k: v for k, v in flagged.items() if v}


def test_shortcuts_are_found():
    answers, protected, modules = _parts(CHAPTERS[0])
    checks = sorted(n for n in protected if n.startswith("check_"))
    assert "check_attend_one" in checks and "W_Q_new" not in protected and "attend_one" not in protected
    cases = {
        f"{checks[0]} = lambda *a, **k: None": "rebinds check_",
        "tfm.check.check_answer = lambda *a, **k: None": "changes tfm.check.check_answer",
        "import tfm.check as c\nc.check_close = print": "changes c.check_close",
        "from tfm import check\ncheck.check_true = print": "changes check.check_true",
        "def f():\n    global check_softmax\n    check_softmax = print": "declares check_softmax global",
        "setattr(tfm.check, 'check_answer', print)": "uses setattr",
        "vars(tfm.check)['check_answer'] = print": "uses vars",
        "globals()['check_zero_query'] = print": "uses globals",
        "weights_by_hand = eval(In[-2].split('=')[1])": "uses eval",
        "weights_by_hand = _ih[5]": "uses _ih",
        "import json\nsource = json.load(open('01_attention_token_by_token.ipynb'))": "imports json",
        "from pathlib import Path\nx = Path('a.ipynb').read_text()": "reads a notebook file",
        "check_attend_one.__code__ = (lambda f, n: None).__code__": "uses check_attend_one.__code__",
        "tfm.check.__dict__.update(check_answer=print)": "uses tfm.check.__dict__",
        "import builtins": "imports builtins",
        "import sys\nsys.modules['tfm.check'] = None": "imports sys",
        "A_tfm.zero_()": "changes A_tfm in place",
        "torch.nn.init.zeros_(W_K)": "changes W_K in place",
        "W_K[0] = 0": "changes W_K[0]",
        "torch.allclose = lambda *a, **k: True": "changes torch.allclose",
        "%time x = 1\n_ = print('ok')": "runs an IPython magic or a shell line (%time x = 1)",
        "%run -i patch_the_checks.py": "runs an IPython magic or a shell line",
        "%%bash\necho hidden": "runs an IPython magic or a shell line (%%bash)",  # the rest is not Python at all
        "!python -c 'print(1)'": "runs an IPython magic or a shell line",
        # found by an adversarial review: each reached a check or the library the check refuses
        "run = getattr(__builtins__, 'exec')": "uses __builtins__",
        "d = getattr(tfm.check, '__di' + 'ct__')": "an attribute named at run time",
        "name = 'check_answer'\nf = getattr(tfm.check, name)": "an attribute named at run time",
        "from concurrent.futures import ThreadPoolExecutor": "imports concurrent.futures",
        "import threading": "imports threading",
        "from torch.utils._python_dispatch import _disable_current_modes": "a library's private part",
        "with torch._C.DisableTorchFunction():\n    pass": "uses torch._C",
        "from torch import _C": "imports torch._C, a library's private part",
        "_ = %pwd\nimport tfm.check as c": "holds IPython syntax",  # not Python: read as IPython runs it
        "_ = %pwd": "uses get_ipython",
        "os.sys.setprofile(None)": "uses os.sys",
        "import _posixsubprocess": "imports _posixsubprocess, a private module",
        "import signal": "imports signal",
    }
    for code, expected in cases.items():
        found = tampering(code, protected, modules)
        assert any(expected in reason for reason in found), (code, found)


def test_honest_answers_pass():
    _, protected, modules = _parts(CHAPTERS[0])
    honest = ["def stable_softmax(scores):\n    e = (scores - scores.max()).exp()\n    return e / e.sum()",
              "W_Q_new = W_Q.clone()\nW_Q_new[2] = torch.tensor([0.0, 3.0])",
              "weights_by_hand = (0.67, 0.24, 0.09)",
              "import math\ndef attend_one(q, K, V):\n    d_k = q.shape[0]\n"
              "    a = torch.softmax(K @ q / math.sqrt(d_k), dim=0)\n    return a @ V, a",
              "config = dict(W_Q.__dict__)",  # reading an object's attributes changes nothing
              "def copy(a, b):\n    for name in ('weight', 'bias'):\n        getattr(b, name).copy_(getattr(a, name))",
              "x = getattr(W_Q, 'shape')",
              "import os\nfolder = os.path.dirname('a/b')",  # files are the grading guard's
              "import os\nos._exit(1)",  # ends the kernel: the guard refuses it, the regrade costs one exercise
              "def f(x):\n    return x + 1 if x else (",  # a syntax error fails when it runs, not here
              ]
    for code in honest:
        assert tampering(code, protected, modules) == [], code
