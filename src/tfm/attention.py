"""Scaled dot-product attention (Vaswani et al., 2017, §3.2.1), in two forms with one signature.

``attention`` spells every step out and returns the attention weights, for teaching and plots.
``fast_attention`` calls ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels where available).
Both take ``q (..., T, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)`` and an optional boolean mask that broadcasts to
``(..., T, S)`` (True = may attend), and both return ``(z, weights)`` with ``z`` of shape ``(..., T, d_v)``;
``fast_attention`` returns ``None`` for the weights. A query whose keys are all masked gets all-zero weights and a zero
output, never NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import check_mask


def check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    """Raise a clear error unless queries, keys and values fit together."""
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., length, width) with at least 2 dims, got {tuple(t.shape)}")
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"query width {q.shape[-1]} differs from key width {k.shape[-1]} "
            f"(query {tuple(q.shape)}, key {tuple(k.shape)}): a query is compared with keys by a dot product"
        )
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"keys {tuple(k.shape)} and values {tuple(v.shape)} must agree in all but the last dim: one value per key"
        )
    if q.shape[:-2] != k.shape[:-2]:
        raise ValueError(
            f"query {tuple(q.shape)} and key {tuple(k.shape)} must have the same leading (batch/head) dims"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"query, key and value must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


def _prepare_mask(mask: Tensor | None, q: Tensor, k: Tensor) -> tuple[Tensor | None, Tensor | None]:
    """Validate ``mask``; return it with fully masked rows opened up, plus the rows that had no key at all."""
    if mask is None:
        return None, None
    scores_shape = (*q.shape[:-1], k.shape[-2])  # (..., T, S)
    check_mask(mask, scores_shape)
    has_key = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
    # A query with no key to attend to would divide 0 by 0 in the softmax. Let it attend everywhere for the
    # arithmetic, then zero its weights and output: no NaN reaches the forward or the backward pass.
    return mask | ~has_key, has_key


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """softmax(Q Kᵀ / √d_k) V, step by step. Returns ``(z, weights)``: ``(..., T, d_v)`` and ``(..., T, S)``."""
    check_qkv(q, k, v)
    safe_mask, has_key = _prepare_mask(mask, q, k)
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T, S)
    if safe_mask is not None:
        scores = scores.masked_fill(~safe_mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., T, S), rows sum to 1
    if has_key is not None:
        weights = weights.masked_fill(~has_key, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    z = weights @ v  # (..., T, d_v)
    if has_key is not None:
        z = z.masked_fill(~has_key, 0.0)  # exact zeros even where v holds NaN (0 x NaN = NaN)
    return z, weights  # (..., T, d_v), (..., T, S)


def fast_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, None]:
    """The same computation as :func:`attention` through PyTorch's fused kernel. Returns ``(z, None)``."""
    check_qkv(q, k, v)
    safe_mask, has_key = _prepare_mask(mask, q, k)
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=safe_mask, dropout_p=dropout_p)  # (..., T, d_v)
    if has_key is not None:
        z = z.masked_fill(~has_key, 0.0)
    return z, None
