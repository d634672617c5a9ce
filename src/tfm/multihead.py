"""Multi-head attention (Vaswani et al., 2017, §3.2.2).

The three projections W_Q, W_K, W_V of all heads are stored as one ``nn.Linear(d_model, 3 * d_model)``, laid out like
``nn.MultiheadAttention.in_proj_weight`` (rows: queries, then keys, then values). Self-attention projects ``x`` once
(fused); cross-attention projects the queries from ``x`` and the keys and values from ``memory``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import attention, fast_attention

KVCache = dict
"""A layer's key/value cache: ``{"k": (B, h, S, d_k), "v": (B, h, S, d_k)}``, filled in by the forward pass."""


class MultiHeadAttention(nn.Module):
    """``h`` attention heads of width ``d_k = d_model / h``, concatenated and projected back to ``d_model``.

    ``fast=True`` uses :func:`tfm.fast_attention` unless the weights are requested; ``fast=False`` always uses the
    explicit :func:`tfm.attention`. ``rotary`` (a :class:`tfm.RotaryEmbedding` of width d_k, or None) rotates each
    head's queries and keys by their positions before the scores (chapter 5; self-attention only): a cached step's
    new tokens sit after the cached ones.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, fast: bool = True):
        super().__init__()
        if d_model <= 0 or n_heads <= 0:
            raise ValueError(f"d_model and n_heads must be positive, got d_model={d_model}, n_heads={n_heads}")
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: each head needs d_model / n_heads features"
            )
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout, self.fast = dropout, fast
        self.rotary: nn.Module | None = None  # set by a model that wants rotary positions (tfm.CausalLM)
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # [W_Q | W_K | W_V], stored transposed
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, h, T, d_k)."""
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, T, d_k)

    def merge_heads(self, z: Tensor) -> Tensor:
        """(B, h, T, d_k) -> (B, T, d_model): the concatenation of the heads."""
        B, _, T, _ = z.shape
        return z.transpose(1, 2).reshape(B, T, self.d_model)  # (B, T, d_model)

    def _project_rows(self, x: Tensor, first: int, last: int) -> Tensor:
        """Apply rows ``first*d_model : last*d_model`` of the fused projection: 0-1 queries, 1-3 keys and values."""
        d, w, b = self.d_model, self.in_proj.weight, self.in_proj.bias
        return F.linear(x, w[first * d : last * d], None if b is None else b[first * d : last * d])

    def project(self, x: Tensor, memory: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values, each (B, h, ·, d_k). With ``memory``, keys and values come from it."""
        if memory is None:
            q, k, v = self.in_proj(x).chunk(3, dim=-1)  # 3 x (B, T, d_model): one fused matrix product
        else:
            q = self._project_rows(x, 0, 1)  # (B, T, d_model)
            k, v = self._project_rows(memory, 1, 3).chunk(2, dim=-1)  # 2 x (B, S, d_model)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x (B, T, d_model)`` to itself, or to ``memory (B, S, d_model)`` (cross-attention).

        ``mask`` broadcasts to ``(B, h, T, S)``: ``(T, S)``, ``(B, 1, 1, S)`` or ``(B, 1, T, S)``, True = may attend.
        ``cache`` (a dict, possibly empty) makes decoding incremental: self-attention appends the new keys and values
        to it; cross-attention computes the memory's keys and values once and reuses them.
        Returns ``(out (B, T, d_model), weights (B, h, T, S) or None)``.
        """
        self._check_input(x, "x")
        if memory is not None:
            self._check_input(memory, "memory")
            if memory.shape[0] != x.shape[0]:
                raise ValueError(f"x has batch size {x.shape[0]} but memory has {memory.shape[0]}")
        if cache is not None and memory is not None and "k" in cache:
            q = self.split_heads(self._project_rows(x, 0, 1))  # (B, h, T, d_k): only the queries are new
            k, v = cache["k"], cache["v"]  # (B, h, S, d_k)
        else:
            q, k, v = self.project(x, memory)  # (B, h, T, d_k), (B, h, S, d_k), (B, h, S, d_k)
            if self.rotary is not None and memory is None:
                start = cache["k"].shape[2] if cache is not None and "k" in cache else 0  # positions already cached
                q, k = self.rotary(q, start), self.rotary(k, start)  # (B, h, T, d_k) each, rotated
            if cache is not None:
                if memory is None and "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)  # (B, h, S_past + T, d_k)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        p = self.dropout if self.training else 0.0
        if need_weights or not self.fast:
            z, weights = attention(q, k, v, mask=mask, dropout_p=p)  # (B, h, T, d_k), (B, h, T, S)
        else:
            z, weights = fast_attention(q, k, v, mask=mask, dropout_p=p)
        return self.out_proj(self.merge_heads(z)), weights  # (B, T, d_model)

    def _check_input(self, t: Tensor, name: str) -> None:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3 or t.shape[-1] != self.d_model:
            raise ValueError(f"{name} must have shape (B, length, d_model={self.d_model}), got {tuple(t.shape)}")
        if t.shape[0] == 0:
            raise ValueError(f"{name} is an empty batch (shape {tuple(t.shape)})")
