"""Chapter 11's ★★★ exercise (causal attention, block by block) cannot be passed by attention that holds the whole
T x S matrix: its check, run here from the notebook itself, fails on answers that are right but not blockwise, on
answers that are blockwise but wrong, and passes the book's solution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import tfm
from tfm.check import CheckFailed

CHAPTER = Path(__file__).resolve().parents[1] / "chapters" / "11_cost_of_attention.ipynb"


@pytest.fixture(scope="module")
def chapter():
    """The chapter's imports and the hidden cell that defines its checks, run in a namespace of their own."""
    cells = [c for c in json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    namespace: dict = {}
    for needed in ("import tfm\n", "from tfm.cost import (", "def check_blockwise_masked(",
                   "def blockwise_attention_masked_solution"):
        exec("".join(next(c for c in cells if needed in "".join(c["source"]))["source"]), namespace)
    return namespace


def check(chapter, fn):
    chapter["check_blockwise_masked"](fn, "answer")


def masked_reference(q, k, v, mask, block=128):
    return tfm.attention(q, k, v, mask=mask)[0]


def masked_sdpa(q, k, v, mask, block=128):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def masked_softmax(q, k, v, mask, block=128):
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))  # (B, h, T, S)
    return scores.softmax(-1) @ v


def one_head_at_a_time(q, k, v, mask, block=128):
    return torch.stack([masked_reference(q[:, i], k[:, i], v[:, i], mask) for i in range(q.shape[1])], dim=1)


def query_rows_one_by_one(q, k, v, mask, block=128):
    # rows of (1, S) scores: never a T x S matrix, and right, but no online softmax: the keys are never split
    rows = [torch.softmax((q[..., i : i + 1, :] @ k.transpose(-2, -1) / q.shape[-1] ** 0.5)
                          .masked_fill(~mask[i], float("-inf")), -1) @ v for i in range(q.shape[-2])]
    return torch.cat(rows, dim=-2)


@pytest.mark.parametrize(("cheat", "message"), [
    (masked_reference, "calls tfm.attention.attention, which computes the answer"),
    (masked_sdpa, "calls PyTorch's scaled_dot_product_attention"),
    (masked_softmax, "whole T x S matrix"),
    (one_head_at_a_time, "calls tfm.attention.attention, which computes the answer"),
])
def test_right_answers_that_hold_the_whole_matrix_fail(chapter, cheat, message):
    with pytest.raises(CheckFailed, match=message):
        check(chapter, cheat)


def tfm_over_query_blocks(q, k, v, mask, block=128):
    # tfm.attention on (block, S) slices of the queries: no whole matrix, no online softmax
    return torch.cat([tfm.attention(q[..., i : i + block, :], k, v, mask=mask[i : i + block])[0]
                      for i in range(0, q.shape[-2], block)], dim=-2)


def own_softmax_over_query_blocks(q, k, v, mask, block=128):
    return torch.cat([masked_softmax(q[..., i : i + block, :], k, v, mask[i : i + block])
                      for i in range(0, q.shape[-2], block)], dim=-2)


@pytest.mark.parametrize(("cheat", "message"), [
    (tfm_over_query_blocks, "this exercise asks you to write it yourself"),
    (own_softmax_over_query_blocks, "scores of queries against all 640 keys at once"),
    (query_rows_one_by_one, "scores of queries against all 640 keys at once"),
])
def test_right_answers_that_split_only_the_queries_fail(chapter, cheat, message):
    with pytest.raises(CheckFailed, match=message):
        check(chapter, cheat)


def test_blockwise_answers_that_are_wrong_fail(chapter):
    def no_safe_max(q, k, v, mask, block=128):  # the slip the solution's text describes: NaN under the second mask
        running_max = torch.full(q.shape[:-1] + (1,), float("-inf"))  # (..., T, 1)
        denominator, output = torch.zeros(q.shape[:-1] + (1,)), torch.zeros(q.shape[:-1] + (v.shape[-1],))
        for start in range(0, k.shape[-2], block):
            scores = q @ k[..., start : start + block, :].transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., T, block)
            scores = scores.masked_fill(~mask[:, start : start + block], float("-inf"))
            new_max = torch.maximum(running_max, scores.amax(-1, keepdim=True))
            correction, p = torch.exp(running_max - new_max), torch.exp(scores - new_max)
            denominator = correction * denominator + p.sum(-1, keepdim=True)
            output = correction * output + p @ v[..., start : start + block, :]
            running_max = new_max
        return output / denominator

    def ignores_the_mask(q, k, v, mask, block=128):
        return chapter["blockwise_attention_masked_solution"](q, k, v, torch.ones_like(mask), block)

    for wrong, message in ((no_safe_max, "NaN"), (ignores_the_mask, "differs"), (lambda *a, **k: None, "tensor")):
        with pytest.raises(CheckFailed, match=message):
            check(chapter, wrong)
    with pytest.raises(CheckFailed, match="not written yet"):
        check(chapter, lambda *a, **k: (_ for _ in ()).throw(NotImplementedError))


def test_blockwise_answers_pass(chapter, capsys):
    check(chapter, chapter["blockwise_attention_masked_solution"])

    def tiles(q, k, v, mask, block=128):  # the bonus: blocks of queries as well as of keys
        solution = chapter["blockwise_attention_masked_solution"]
        return torch.cat([solution(q[..., i : i + block, :], k, v, mask[i : i + block], block)
                          for i in range(0, q.shape[-2], block)], dim=-2)

    check(chapter, tiles)

    def keys_transposed_first(q, k, v, mask, block=128):  # a (d_k, S) copy of the keys is not a row of scores
        k_t = k.transpose(-2, -1).contiguous()  # (..., d_k, S)
        return chapter["blockwise_attention_masked_solution"](q, k_t.transpose(-2, -1), v, mask, block)

    check(chapter, keys_transposed_first)
    assert capsys.readouterr().out.count("✓") == 3
