"""Private hidden tests for every coding exercise checked apart: the learner's functions on inputs nobody has seen.

When an exercise's check passes in the checks process (tools/course/apart.py), each call it made to one of the
learner's functions is made again on fresh inputs of the same shapes: floating-point tensors redrawn at random with
the same mean and spread (their infinities kept where they were), integer tensors redrawn from the range of their
visible values (so lengths and ids stay valid), positive integers (sizes, a `max_len`) made 1 to 3 larger where the
solution accepts that, boolean tensors (masks) drawn as another pattern of the same shape where the solution
accepts that, Python booleans, strings and modules unchanged. The instructor's solution (the
source version's answer cell, run in the checks process) answers the same inputs, and the learner's result must
agree with it (within 1e-3 relative, 1e-4 of the largest value absolute). The draws come from a seed taken from
the operating system at grading time, so they are in no file a learner could read, and a table of the visible
cases' answers fails them.

A call is not tried again where nothing in it can be redrawn, where the solution itself rejects the new inputs (a
precondition the random values broke), or where the solution gives two different results on the same inputs (a
random function, whose right answers differ); at most three calls per exercise are tried.
"""

from __future__ import annotations

import copy
import os

MOST = 3


def redrawn(value, generator, numbers: bool = True):
    """`value` with its tensors redrawn (see the module's docstring), and with `numbers` its positive integers made
    1 to 3 larger; (the new value, whether anything changed)."""
    import torch

    if numbers and type(value) is int and value > 0:
        return value + int(torch.randint(1, 4, (1,), generator=generator)), True

    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        if value.dtype.is_floating_point and value.numel() > 0:
            finite = torch.isfinite(value)
            if not finite.any():
                return value, False
            known = value[finite].double()
            spread = known.std().item() if known.numel() > 1 else 0.0
            spread = spread if spread > 0 else max(1.0, abs(known.mean().item()))
            fresh = torch.randn(value.shape, generator=generator, dtype=torch.float64) * spread + known.mean()
            fresh = torch.where(finite, fresh.to(value.dtype), value).detach()
            return fresh.requires_grad_(value.requires_grad), True
        if numbers and value.dtype == torch.bool and value.numel() > 1:  # a mask: another pattern of the same shape
            for _ in range(20):
                fresh = torch.rand(value.shape, generator=generator) < 0.5
                if not torch.equal(fresh, value):
                    return fresh, True
            return value, False
        if not value.dtype.is_floating_point and value.dtype != torch.bool and value.numel() > 1:
            low, high = int(value.min()), int(value.max())
            for _ in range(20):  # other values from the visible range (so lengths and ids stay valid), else reorder
                fresh = torch.randint(low, high + 1, value.shape, generator=generator, dtype=value.dtype)
                if low == high or torch.equal(fresh, value):
                    fresh = value.flatten()[torch.randperm(value.numel(), generator=generator)].reshape(value.shape)
                if not torch.equal(fresh, value):
                    return fresh, True
            return value, False
        return value, False
    if isinstance(value, list | tuple):
        pairs = [redrawn(v, generator, numbers) for v in value]
        items = [p[0] for p in pairs]
        return (type(value)(items) if isinstance(value, list) else tuple(items)), any(p[1] for p in pairs)
    if isinstance(value, dict):
        pairs = {k: redrawn(v, generator, numbers) for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, any(p[1] for p in pairs.values())
    return value, False


def agree(got, expected) -> bool:
    """The learner's result and the solution's are the same answer: tensors (NumPy arrays) of one shape within the
    tolerance, NaN where NaN, numbers within it, containers item by item, anything else equal."""
    import numpy as np
    import torch

    if isinstance(expected, np.ndarray | np.generic):
        expected = torch.as_tensor(np.asarray(expected))
    if isinstance(got, np.ndarray | np.generic):
        got = torch.as_tensor(np.asarray(got))
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return False
        if expected.dtype == torch.bool or got.dtype == torch.bool:
            return got.dtype == expected.dtype and torch.equal(got, expected)
        e, g = expected.detach().double(), got.detach().double()
        finite = torch.isfinite(e)
        scale = e[finite].abs().max().item() if finite.any() else 1.0
        return bool(torch.allclose(g, e, rtol=1e-3, atol=1e-4 * max(1.0, scale), equal_nan=True))
    if isinstance(expected, bool) or isinstance(got, bool):
        return got == expected
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return abs(got - expected) <= max(1e-4, 1e-3 * abs(expected)) or (got != got and expected != expected)
    if isinstance(expected, list | tuple):
        return isinstance(got, list | tuple) and len(got) == len(expected) and all(
            agree(g, e) for g, e in zip(got, expected, strict=True))
    if isinstance(expected, dict):
        return isinstance(got, dict) and got.keys() == expected.keys() and all(agree(got[k], expected[k])
                                                                                for k in expected)
    try:
        return bool(got == expected)
    except Exception:
        return False


def hidden_tests(calls: list[tuple], solutions: dict, ask) -> str:
    """Try the check's `calls` ((name, args, kwargs, refused) each) again on fresh inputs; "" if the learner's
    results agree with `solutions` (name -> the instructor's function), else why not. `ask` runs a call in the
    answers process (apart.Link.ask)."""
    import torch

    generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    tried = 0
    for name, args, kwargs, refused in calls:
        solution = solutions.get(name)
        if solution is None or tried == MOST:
            continue
        for numbers in (True, False):  # larger sizes too, unless the solution refuses them (heads must divide...)
            (fresh_args, fresh_kwargs), changed = redrawn((list(args), dict(kwargs)), generator, numbers)
            try:
                expected = solution(*copy.deepcopy(fresh_args), **copy.deepcopy(fresh_kwargs))
                again = solution(*copy.deepcopy(fresh_args), **copy.deepcopy(fresh_kwargs))
                break
            except Exception:
                changed = False  # the new inputs break a precondition of the exercise
        if not changed or not agree(again, expected):
            continue  # nothing redrawn, or a random function (two right answers differ)
        tried += 1
        try:
            got = ask(("call", name, tuple(fresh_args), fresh_kwargs, refused))
        except Exception as error:
            return (f"a hidden test (other inputs than the check's) makes {name} raise "
                    f"{type(error).__name__}: {str(error)[:100]}")
        if not agree(got, expected):
            return (f"a hidden test gives {name} other inputs than the check's, and its result is not the right "
                    "one there: is something fitted to the visible cases?")
    return ""
