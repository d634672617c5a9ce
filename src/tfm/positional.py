"""Position information: sinusoidal encoding (Vaswani et al., 2017, §3.5), learned embeddings (as in BERT) and
rotary embeddings (RoPE, Su et al., 2021).

Every module takes ``start``, the position of the first token of ``x``; incremental decoding passes the number of
tokens already processed. Positions are created on ``x``'s device.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(n_positions: int, d_model: int) -> Tensor:
    """PE ``(n_positions, d_model)``: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same)."""
    if n_positions < 1 or d_model < 2 or d_model % 2:
        raise ValueError(f"need n_positions >= 1 and an even d_model >= 2, got {n_positions} and {d_model}")
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    frequency = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)  # (n, d/2)
    table[:, 1::2] = torch.cos(position * frequency)
    return table.float()


def _check_positions(x: Tensor, start: int, max_len: int, what: str) -> int:
    if x.dim() < 2:
        raise ValueError(f"{what} expects (..., length, width), got shape {tuple(x.shape)}")
    length = x.shape[-2]
    if start < 0 or start + length > max_len:
        raise ValueError(
            f"positions {start}..{start + length - 1} do not fit the {what} table of max_len={max_len}; "
            f"the sequence is too long (length {length}): build the module with a larger max_len"
        )
    return length


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to ``x (B, T, d_model)``, then applies dropout (§5.4)."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)  # (max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        T = _check_positions(x, start, self.max_len, "sinusoidal positional encoding")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the encoding was built for d_model={self.d_model}")
        return self.dropout(x + self.table[start : start + T].to(x.dtype))  # (B, T, d_model)


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (BERT, GPT), then applies dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        T = _check_positions(x, start, self.max_len, "learned position embedding")
        positions = torch.arange(start, start + T, device=x.device)  # (T,), on x's device
        return self.dropout(x + self.embedding(positions))  # (B, T, d_model)


def half_layout_permutation(d_head: int) -> Tensor:
    """The feature order that turns the interleaved pairing into the rotate-half one: evens, then odds.

    With ``perm = half_layout_permutation(d)``, ``rope_interleaved(x)[..., perm] == rope_half(x[..., perm])``: the two
    layouts are one rotation of reordered features. A checkpoint written for one layout runs with the other once the
    output rows of W_Q and W_K (each head's block) are reordered by ``perm``, as checkpoint converters do.
    """
    if d_head < 2 or d_head % 2:
        raise ValueError(f"rotary embeddings need an even head width >= 2, got d_head={d_head}")
    return torch.cat([torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)])  # (d_head,)


class RotaryEmbedding(nn.Module):
    """Rotates pairs of features of a query or key by the angle pos · θ_i, θ_i = base^(-2i/d).

    Applied to queries and keys (not values) inside attention, it makes q·k depend on positions only through their
    difference. ``layout="interleaved"`` pairs adjacent features (2i, 2i+1), as the RoFormer paper writes it: x R_pos
    with R_pos block-diagonal, the block [[cos, sin], [-sin, cos]] of angle pos · θ_i on features (2i, 2i+1).
    ``layout="half"`` pairs feature i with i + d/2 ("rotate half"), as Hugging Face's Llama does: the same rotation of
    reordered features (:func:`half_layout_permutation`; tests/test_rope.py).
    """

    LAYOUTS = ("interleaved", "half")

    def __init__(self, d_head: int, max_len: int = 512, base: float = 10000.0, layout: str = "interleaved"):
        super().__init__()
        if d_head < 2 or d_head % 2:
            raise ValueError(f"rotary embeddings need an even head width >= 2, got d_head={d_head}")
        if layout not in self.LAYOUTS:
            raise ValueError(f"layout must be one of {self.LAYOUTS}, got {layout!r}")
        self.d_head, self.max_len, self.layout = d_head, max_len, layout
        theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (d/2,)
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * theta  # (max_len, d/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Tensor, start: int = 0, positions: Tensor | None = None) -> Tensor:
        """Rotate ``x (..., T, d_head)`` as if its tokens sat at positions ``start .. start + T - 1``; given ``positions
        (B, T)`` and ``x (B, h, T, d_head)``, each token at its own position (packed documents restart at 0)."""
        T = _check_positions(x, start, self.max_len, "rotary embedding")
        if x.shape[-1] != self.d_head:
            raise ValueError(f"x has width {x.shape[-1]} but the rotary embedding was built for d_head={self.d_head}")
        if positions is None:
            cos = self.cos[start : start + T].to(x.dtype)  # (T, d/2)
            sin = self.sin[start : start + T].to(x.dtype)
        else:
            cos = self.cos[positions][:, None].to(x.dtype)  # (B, 1, T, d/2): broadcast over heads
            sin = self.sin[positions][:, None].to(x.dtype)
        if self.layout == "half":
            first, second = x.chunk(2, dim=-1)  # (..., T, d/2) each: feature i pairs with i + d/2
            return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)  # (..., T, d_head)
        even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
        rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., T, d/2, 2)
        return rotated.flatten(-2)  # (..., T, d_head)
