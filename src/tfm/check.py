"""Self-checks for learners: each says *what* is wrong (which shape, which value, which property), not just False."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# The characters of output that the book's pages show without cutting a line off (tools/book/page_width.py: a code
# block holds 79 characters at a window width of 1280 px; printed lines keep a margin).
PAGE_WIDTH = 76
REFUSING = [0]  # how many `without` blocks are active (read by the course's grading guard)


def say(text: str) -> None:
    """Print ``text`` wrapped to the page's width, each line after the first indented by two spaces (so that what
    the page shows is never cut at its right edge)."""
    print(textwrap.fill(text, width=PAGE_WIDTH, subsequent_indent="  ", break_long_words=False,
                        break_on_hyphens=False))


class CheckFailed(AssertionError):
    """Raised by a self-check; the message explains the mismatch. Jupyter shows the message, not a traceback, wrapped
    to the page's width (the notebook stores the wrapped lines, which are what the website shows)."""

    def _render_traceback_(self) -> list[str]:
        return textwrap.wrap(f"CheckFailed: {self}", width=PAGE_WIDTH, subsequent_indent="    ")


@contextmanager
def learner_code(name: str, fn: Callable | None = None, answers: Sequence[object] = ()) -> Iterator[None]:
    """Run a check on the learner's ``name``; an error raised by their code becomes a CheckFailed that says so.

    ``with learner_code("mha_fixed_1"): check_mha(mha_fixed_1)`` fails with "mha_fixed_1 is not written yet ..." while
    the stub still raises NotImplementedError, instead of a traceback that starts in the check. With ``fn`` and
    ``answers`` the block runs :func:`without` them: an answer that calls what it was asked to write fails.
    """
    if answers and fn is None:
        raise ValueError("learner_code needs the learner's fn to run it without the answers")
    try:
        if answers:
            with without(fn, *answers, name=name):
                yield
        else:
            yield
    except CheckFailed:
        raise
    except NotImplementedError:
        raise CheckFailed(f"{name} is not written yet: replace the line `raise NotImplementedError(...)` with your "
                          "code, run that cell, then run this check again") from None
    except NameError as error:
        raise CheckFailed(f"{name} raised NameError: {error} (a typo, a missing import, or a cell not run yet?)"
                          + _where(error)) from None
    except Exception as error:  # the learner's code crashed: say where, keep the message
        raise CheckFailed(f"{name} raised {type(error).__name__}: {error}" + _where(error)) from None


class _Unavailable:
    """What a name that computes the answer is bound to while :func:`without` runs the learner's code."""

    def __init__(self, name: str, what: str):
        self.name, self.what = name, what

    def __call__(self, *args, **kwargs):
        raise CheckFailed(f"{self.name} calls {self.what}, which computes the answer: this exercise asks you to "
                          f"write it yourself, so the check runs your code without {self.what}")

    def __getattr__(self, attribute: str):
        self(attribute)


def _refused(operation: str, operations: set[str]) -> bool:
    """Whether ``operation`` (``softmax``, ``_softmax.default``, ``repeat_interleave.self_int``) is one of, or a
    variant of, ``operations``: its name without the overload and the leading underscores starts with one of them."""
    base = operation.split(".")[0].lstrip("_")
    return any(base.startswith(name.lstrip("_")) for name in operations)


class _Refusing(TorchFunctionMode):
    """Refuses the PyTorch operations named in ``operations`` while it is active (see :func:`without`), as they are
    called (``torch.softmax``, ``F.softmin``, ``torch.ops.aten._softmax``)."""

    def __init__(self, name: str, operations: set[str]):
        super().__init__()
        self.name, self.operations = name, operations

    def __torch_function__(self, func, types, args=(), kwargs=None):
        _refuse(self.name, getattr(func, "__name__", ""), self.operations)
        return func(*args, **(kwargs or {}))


class _RefusingKernels(TorchDispatchMode):
    """The same below every spelling, at the operators that do the arithmetic (``aten._softmax`` for ``F.softmin``,
    ``cross_entropy`` or a call with torch functions disabled)."""

    def __init__(self, name: str, operations: set[str]):
        super().__init__()
        self.name, self.operations = name, operations

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        _refuse(self.name, func.overloadpacket.__name__, self.operations)
        return func(*args, **(kwargs or {}))


def _refuse(name: str, operation: str, operations: set[str]) -> None:
    if _refused(operation, operations):
        shown = operation.split(".")[0]
        raise CheckFailed(f"{name} calls PyTorch's {shown}, which computes the answer: this exercise asks you to "
                          f"write it yourself, so the check runs your code without {shown}")


def _answer_codes(answers: Sequence[object]) -> dict:
    """The code objects of the answers written in Python (a class: its own functions), each with the answer's name."""
    codes = {}
    for obj in answers:
        obj = inspect.unwrap(getattr(obj, "func", obj))  # a functools.partial; a decorated function's own code
        functions = vars(obj).values() if isinstance(obj, type) else [obj]
        for function in functions:
            if isinstance(function, _Unavailable):
                continue
            code = getattr(getattr(function, "__func__", function), "__code__", None)  # staticmethod, classmethod
            if code is not None:
                codes[code] = _qualified(obj)
    return codes


def _owner(method: object) -> type | None:
    """The class that defines ``method`` as a plain function in its own body (``A.f`` for ``def f`` inside ``class A``),
    looked up through the module that defines it; None for anything else."""
    qualname, name = getattr(method, "__qualname__", ""), getattr(method, "__name__", "")
    if not callable(method) or qualname.count(".") != 1 or isinstance(method, type):
        return None
    owner = getattr(sys.modules.get(getattr(method, "__module__", None) or ""), qualname.split(".")[0], None)
    return owner if isinstance(owner, type) and vars(owner).get(name) is method else None


def _qualified(obj: object) -> str:
    """``tfm.positional.RotaryEmbedding``; a notebook's own function as "the chapter's rope_rotate_half"."""
    module = getattr(obj, "__module__", "") or ""
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"the chapter's {name}" if module == "__main__" else f"{module}.{name}".lstrip(".")


@contextmanager
def without(fn: Callable, *answers: object, name: str | None = None) -> Iterator[None]:
    """Run the learner's ``fn`` with ``answers`` (the ``tfm`` functions or classes, or the chapter's reference
    objects, that compute what the exercise asks for) made unavailable.

    For the duration, every name bound to one of them is bound to a stand-in that raises a CheckFailed saying so:
    the attributes of ``tfm``'s modules and of ``__main__`` (``tfm.X``, ``from tfm.x import X``, an alias of a
    module), the globals of ``fn`` (the notebook's names, an alias ``f = tfm.X`` included) and ``fn``'s default
    arguments. Everything is restored afterwards. Compute the expected value outside this block.

    An answer given as a string names a PyTorch operation (``"softmax"``, ``"scaled_dot_product_attention"``,
    ``"repeat_interleave"``): every call of it is refused, however it is spelled (``torch.softmax``, ``F.softmax``,
    ``x.softmax``, ``nn.Softmax``), because a ``TorchFunctionMode`` sees the calls themselves, not the names, and a
    ``TorchDispatchMode`` the kernels under them (``F.softmin`` reaches ``aten._softmax``). The answers' own Python code
    is refused when it runs, however it was reached (a profile hook on their code objects).

    ``with without(my_answer, tfm.incontext.prefix_matching_scores): got = my_answer(weights, 4)``
    """
    name = name or getattr(fn, "__name__", "your function")
    operations = {a for a in answers if isinstance(a, str)}
    answers = tuple(a for a in answers if not isinstance(a, str))
    codes = _answer_codes(answers)  # before any name is replaced by a stand-in
    for obj in answers:  # `my_mask = tfm.padding_mask`, or a functools.partial of it
        if fn is obj or getattr(fn, "func", None) is obj:
            raise CheckFailed(f"{name} is {_qualified(obj)} itself: this exercise asks you to write it yourself")
    targets = {id(obj): _Unavailable(name, _qualified(obj)) for obj in answers}
    namespaces = [vars(module) for key, module in list(sys.modules.items())
                  if module is not None and (key == "tfm" or key.startswith("tfm.") or key == "__main__")]
    namespaces.append(getattr(fn, "__globals__", {}))
    for obj in answers:  # the module that defines an answer (models.WordPiece through `from tokenizers import models`)
        home = sys.modules.get(getattr(obj, "__module__", None) or "")
        if home is not None and getattr(home, getattr(obj, "__name__", ""), None) is obj:
            namespaces.append(vars(home))
    changed: list[tuple[dict, str, object]] = []
    seen: set[int] = set()
    for namespace in namespaces:
        if id(namespace) in seen:
            continue
        seen.add(id(namespace))
        for key, value in list(namespace.items()):
            if id(value) in targets:
                changed.append((namespace, key, value))
                namespace[key] = targets[id(value)]
    for obj in answers:  # an instance made before the check (R = tfm.RotaryEmbedding(16)) is called via forward
        if isinstance(obj, type) and "forward" in vars(obj):
            changed.append((obj, "forward", vars(obj)["forward"]))
            obj.forward = targets[id(obj)]
        owner = _owner(obj)  # a method (tfm.bpe.BPETokenizer.split_word): refused on the instances made before too
        if owner is not None:
            changed.append((owner, obj.__name__, vars(owner)[obj.__name__]))
            setattr(owner, obj.__name__, targets[id(obj)])
    defaults = getattr(fn, "__defaults__", None)
    if defaults:
        fn.__defaults__ = tuple(targets.get(id(v), v) for v in defaults)
    previous = sys.getprofile()

    def refuse_code(frame, event, arg):  # the answers' own code, however it is reached (a closure, a list, a reload)
        if event == "call" and frame.f_code in codes:
            raise CheckFailed(f"{name} calls {codes[frame.f_code]}, which computes the answer: this exercise asks "
                              f"you to write it yourself, so the check runs your code without it")

    REFUSING[0] += 1  # a grading guard refuses new threads meanwhile: the refusals hold in this thread only
    try:
        with contextlib.ExitStack() as refusing:
            if operations:
                refusing.enter_context(_RefusingKernels(name, operations))
                refusing.enter_context(_Refusing(name, operations))
            if codes:
                sys.setprofile(refuse_code)
            yield
    finally:
        REFUSING[0] -= 1
        if codes:
            sys.setprofile(previous)
        for namespace, key, value in reversed(changed):
            if isinstance(namespace, type):
                setattr(namespace, key, value)
            else:
                namespace[key] = value
        if defaults:
            fn.__defaults__ = defaults


def _where(error: BaseException) -> str:
    """The line of the learner's own code (a notebook cell, not a library) where ``error`` was raised."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f.line and ("ipykernel" in f.filename or f.filename.startswith("<"))]
    return f", in the line `{frames[-1].line.strip()}`" if frames else ""


def _plain(value: object) -> object:
    """A tensor or array as Python numbers (a scalar, or a tuple), so that answers compare by value."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    return tuple(_plain(v) for v in value) if isinstance(value, list | tuple) else value


def _matches(got: object, expected: object, atol: float) -> bool:
    if isinstance(expected, tuple):
        return isinstance(got, tuple) and len(got) == len(expected) and all(
            _matches(g, e, atol) for g, e in zip(got, expected, strict=True))
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        return isinstance(got, int | float) and abs(got - expected) <= max(atol, 1e-6 * max(1.0, abs(expected)))
    return bool(got == expected)


class _Slip(str):
    """A hint that names the slip an answer shows: check_answer gives it even where the answer is near the right one
    (a named slip is better advice than "close")."""


def slip_hint(answer: object, slips: dict, otherwise: str) -> str:
    """The hint of ``slips`` (typical wrong answer -> hint) that ``answer`` shows, else ``otherwise``. Where several
    slips lie within the tolerance (two wrong answers 0.01% apart), the nearest one is named."""
    try:
        given = torch.as_tensor(answer, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):  # not numbers (yet)
        return otherwise
    near = []
    for wrong, hint in slips.items():
        wrong = torch.as_tensor(wrong, dtype=torch.float64)
        if given.shape == wrong.shape and torch.allclose(given, wrong, rtol=1e-3, atol=0.006):
            near.append((float((given - wrong).abs().max()), hint))
    return _Slip(min(near, key=lambda pair: pair[0])[1]) if near else otherwise


def factor_hint(got: object, expected: float, factors: dict[float, str], otherwise: str, most: int = 3) -> str:
    """For an answer that is ``expected`` times a product of up to ``most`` of ``factors`` (a slip's factor -> its
    hint: 1/2 for a key counted without its value), the hints of those slips joined, so that two slips made together
    are both named; else ``otherwise``."""
    try:
        ratio = float(got) / float(expected)
    except (TypeError, ValueError, ZeroDivisionError):
        return otherwise
    for size in range(1, most + 1):
        for chosen in itertools.combinations(factors.items(), size):
            if abs(ratio / math.prod(f for f, _ in chosen) - 1) < 1e-3:
                return _Slip("; and ".join(hint for _, hint in chosen))
    return otherwise


def _wanted(value: object, expected: object) -> str | None:
    """The kind of answer that can equal ``expected`` (a plain value), in words, where ``value`` is not of it."""
    size = len(expected) if isinstance(expected, tuple) else 0
    for kind, accepted, words in [(bool, int | float, "True or False (a bool)"), (str, str, "text (a str)"),
                                  (int, int | float, "a whole number (an int)"),
                                  (float, int | float, "a number (an int or a float)"),
                                  (tuple, tuple, f"{size} values (a tuple, a list or a tensor)")]:
        if isinstance(expected, kind):  # a bool is an int, but no count: True for 1 passes only where True is asked
            wrong = not isinstance(value, accepted) or (kind in (int, float) and isinstance(value, bool))
            return words if wrong else None
    return None


def check_answer(got: object, expected: object, name: str = "your answer", hint: str = "", atol: float = 0.0,
                 quiet: bool = False) -> None:
    """Fail unless ``got`` equals ``expected`` by value (numbers within ``atol``); ``None`` or ``...``: not answered.

    ``(2, 3)``, ``[2, 3]`` and ``torch.tensor([2, 3])`` are the same answer; ``atol=0.005`` passes two decimals.
    An answer of another kind (text where a number is asked for) is told what kind was expected and what it got,
    without the hint, which is about the value. ``quiet=True`` prints nothing when the answer is right (for an answer
    too long to repeat on one line)."""
    if got is None or got is Ellipsis:
        raise CheckFailed(f"{name} is not answered yet: replace the ... with your answer and run that cell")
    value, target = _plain(got), _plain(expected)
    shown = value if hasattr(got, "tolist") else got  # a tensor is shown as numbers, anything else as given
    wanted = _wanted(value, target)
    if wanted:  # the kind that was asked for and the one given, not the hint (it is about the value)
        kind, text = type(got).__name__, repr(shown) if len(repr(shown)) <= 40 else repr(shown)[:36] + " ..."
        given = "text (a str)" if isinstance(got, str) else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        if isinstance(got, str):  # text where a number or values are asked for
            text += ": write " + ("the values without quotes, separated by commas" if isinstance(target, tuple) else
                                  "True or False, without quotes" if isinstance(target, bool) else
                                  "it without quotes, as a number or an expression that computes one")
        raise CheckFailed(f"{name} should be {wanted}, but it is {given}: {text}")
    if not _matches(value, target, atol):
        close = atol > 0 and _matches(value, target, 10 * atol) and not isinstance(hint, _Slip)
        advice = f"close: give it to within {atol:g}" if close else hint
        raise CheckFailed(f"{name} = {shown!r} is not right" + (f": {advice}" if advice else ""))
    if not quiet:
        say(f"✓ {name} = {shown!r} is right")


def check_shape(got: Tensor, expected: Sequence[int], name: str = "your result") -> None:
    """Fail unless ``got`` is a tensor of shape ``expected``."""
    if not isinstance(got, Tensor):
        raise CheckFailed(f"{name} should be a torch.Tensor but is a {type(got).__name__}")
    if tuple(got.shape) != tuple(expected):
        raise CheckFailed(f"{name} has shape {tuple(got.shape)} but should have shape {tuple(expected)}")


def check_close(got: Tensor, expected: Tensor, name: str = "your result", atol: float = 1e-5,
                rtol: float = 1e-5, quiet: bool = False) -> None:
    """Fail unless ``got`` matches ``expected`` in shape and values; report the worst entry if not."""
    check_shape(got, expected.shape, name)
    got_c, exp_c = got.detach().to("cpu", torch.float64), expected.detach().to("cpu", torch.float64)
    if torch.isnan(got_c).any():
        where = tuple(torch.nonzero(torch.isnan(got_c))[0].tolist())
        raise CheckFailed(f"{name} contains NaN, first at index {where}")
    diff = (got_c - exp_c).abs()
    bad = diff > atol + rtol * exp_c.abs()
    if bad.any():
        where = tuple(torch.nonzero(diff == diff.max())[0].tolist())
        raise CheckFailed(
            f"{name} differs from the expected values at {int(bad.sum())} of {diff.numel()} entries; "
            f"the largest difference is {diff.max().item():.2g} at index {where}: "
            f"got {got_c[where].item():.4g}, expected {exp_c[where].item():.4g}"
        )
    if not quiet:
        # The bound that was checked, not the difference itself: the last bits of a float differ between CPUs,
        # so a printed difference would make the stored output depend on the machine that produced it.
        say(f"✓ {name} matches (shape {tuple(got.shape)}, every entry within {_bound(atol, rtol)})")


def _bound(atol: float, rtol: float) -> str:
    return f"{atol:g}" if rtol == 0 else f"{atol:g} + {rtol:g}·|expected|"


def check_rows_sum_to_one(weights: Tensor, name: str = "attention weights", atol: float = 1e-5) -> None:
    """Fail unless every row of ``weights (..., T, S)`` is a probability distribution."""
    if (weights < -atol).any():
        raise CheckFailed(f"{name} has negative entries (minimum {weights.min().item():.3g})")
    sums = weights.sum(-1)
    worst = (sums - 1).abs().max().item()
    if worst > atol:
        index = tuple(torch.nonzero((sums - 1).abs() == worst)[0].tolist())
        raise CheckFailed(f"row {index} of {name} sums to {sums[index].item():.6g}, not 1: did you softmax over "
                          "the right dimension (the keys, dim=-1)?")
    say(f"✓ every row of {name} sums to 1")


def check_true(condition: bool, message: str) -> None:
    """Fail with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)
