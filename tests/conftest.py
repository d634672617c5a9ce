"""Shared helpers for the tests: weight copying between tfm and torch.nn, a seeded generator, and the fixtures that
skip (or, under TFM_REQUIRE_BROWSER=1 as in CI, fail) the browser and PDF checks on a machine without their tools."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import tfm

TOL = 1e-5  # float32 equality with weights copied across (the bar set for tfm)

# The test tensors are tiny: a second thread buys nothing and, on a busy machine, makes every op wait for it
# (measured: greedy decoding of 10 tokens 0.9 s with 2 threads under load, 0.03 s with one).
torch.set_num_threads(1)


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: its tools/ package
from tools.course import browser  # noqa: E402


def _require(what_is_missing: str | None) -> None:
    if what_is_missing is None:
        return
    if os.environ.get("TFM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{what_is_missing} (TFM_REQUIRE_BROWSER=1: the browser checks must run)")
    pytest.skip(what_is_missing)


@pytest.fixture(scope="session")
def browser_tools() -> None:
    """Chromium, npm and Playwright are here (tools/course/browser.py)."""
    _require(browser.missing())


@pytest.fixture(scope="session")
def pdf_tools() -> None:
    """The browser tools and poppler, which reads a PDF back."""
    _require(browser.missing(poppler=True))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def copy_mha(ours: tfm.MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """Make ``theirs`` compute with ``ours``'s weights (the fused in-projection has the same layout)."""
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.in_proj.weight)
        theirs.in_proj_bias.copy_(ours.in_proj.bias)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
