"""Choosing a device and seeding every random number generator."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

DEVICE_ENV_VAR = "TFM_DEVICE"
"""Environment variable that overrides the automatic choice, e.g. ``TFM_DEVICE=cpu``."""

_KNOWN = ("cuda", "mps", "cpu")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def get_device(preferred: str | None = None) -> torch.device:
    """Return the device the book's code runs on.

    The order is: ``preferred`` if given, else the ``TFM_DEVICE`` environment variable, else CUDA, then Apple MPS,
    then the CPU. Asking for a device that is not available raises ``ValueError`` instead of silently falling back.
    """
    choice = preferred or os.environ.get(DEVICE_ENV_VAR) or None
    if choice is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    kind = choice.split(":")[0]
    if kind not in _KNOWN:
        raise ValueError(f"unknown device {choice!r}: expected one of {', '.join(_KNOWN)} (optionally 'cuda:N')")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {choice!r} was requested but CUDA is not available on this machine")
    if kind == "mps" and not _mps_available():
        raise ValueError(f"device {choice!r} was requested but Apple MPS is not available on this machine")
    return torch.device(choice)


SEED_OFFSET_ENV_VAR = "TFM_SEED_OFFSET"
"""Shifts every seed given to :func:`seed_everything` and :func:`generator`. Unset (the default) it is 0; the book's
robustness sweep (``make robustness``) sets it to re-run each chapter's training with other seeds."""


def _check_seed(seed: int) -> int:
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    offset = os.environ.get(SEED_OFFSET_ENV_VAR, "0")
    if not offset.isdigit():
        raise ValueError(f"{SEED_OFFSET_ENV_VAR} must be a non-negative integer, got {offset!r}")
    return seed + int(offset)


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, NumPy's and PyTorch's generators (all devices) so that a run can be repeated."""
    seed = _check_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A new ``torch.Generator`` on ``device`` seeded with ``seed``: a private stream of random numbers, e.g. the
    order in which a training loop draws its batches, unaffected by any other random draw."""
    return torch.Generator(device=device).manual_seed(_check_seed(seed))
