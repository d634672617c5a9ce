"""Self-checks for learners: each says *what* is wrong (which shape, which value, which property), not just False."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


class CheckFailed(AssertionError):
    """Raised by a self-check; the message explains the mismatch."""


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
        print(f"✓ {name} matches (shape {tuple(got.shape)}, every entry within {_bound(atol, rtol)})")


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
    print(f"✓ every row of {name} sums to 1")


def check_true(condition: bool, message: str) -> None:
    """Fail with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)
