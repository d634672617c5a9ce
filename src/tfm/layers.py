"""The Transformer's building blocks: position-wise feed-forward network (§3.3), residual connection with layer
normalisation, and the encoder and decoder layers (§3.1), with dropout where §5.4 puts it.

``norm_first=False`` is the paper's post-LN placement, ``LayerNorm(x + Dropout(sublayer(x)))``;
``norm_first=True`` is pre-LN, ``x + Dropout(sublayer(LayerNorm(x)))``. Submodule names follow
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` so that weights map one to one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from .multihead import KVCache, MultiHeadAttention

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """FFN(x) = activation(x W_1 + b_1) W_2 + b_2, applied to every position separately."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.dropout(self.activation(self.linear1(x)))  # (B, T, d_ff)
        return self.linear2(hidden)  # (B, T, d_model)


def residual(x: Tensor, sublayer: Callable[[Tensor], Tensor], norm: nn.LayerNorm, dropout: nn.Dropout,
             norm_first: bool) -> Tensor:
    """One residual connection around ``sublayer``, with the normalisation before (pre-LN) or after (post-LN)."""
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each wrapped in a residual connection."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, activation: str = "relu",
                 norm_first: bool = False, layer_norm_eps: float = 1e-5, fast: bool = True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, fast=fast)
        self.ff = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False,
                cache: KVCache | None = None) -> tuple[Tensor, Tensor | None]:
        """``x (B, T, d_model)`` -> ``(x, weights (B, h, T, S) or None)``. ``cache`` serves causal (GPT-style) use."""
        weights = None

        def self_attention(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.self_attn(h, mask=mask, need_weights=need_weights, cache=cache)
            return out

        x = residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        x = residual(x, self.ff, self.norm2, self.dropout2, self.norm_first)
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output (the memory), then the feed-forward network."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, activation: str = "relu",
                 norm_first: bool = False, layer_norm_eps: float = 1e-5, fast: bool = True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, fast=fast)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, fast=fast)
        self.ff = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                need_weights: bool = False, cache: dict[str, KVCache] | None = None,
                ) -> tuple[Tensor, tuple[Tensor | None, Tensor | None]]:
        """``x (B, T, d_model)``, ``memory (B, S, d_model)`` -> ``(x, (self weights, cross weights))``.

        ``self_mask`` broadcasts to (B, h, T, T) (causal and target padding), ``memory_mask`` to (B, h, T, S)
        (source padding). ``cache`` is a dict that receives ``"self"`` and ``"cross"`` key/value caches.
        """
        weights: dict[str, Tensor | None] = {"self": None, "cross": None}
        self_cache = cross_cache = None
        if cache is not None:
            self_cache, cross_cache = cache.setdefault("self", {}), cache.setdefault("cross", {})

        def self_attention(h: Tensor) -> Tensor:
            out, weights["self"] = self.self_attn(h, mask=self_mask, need_weights=need_weights, cache=self_cache)
            return out

        def cross_attention(h: Tensor) -> Tensor:
            out, weights["cross"] = self.cross_attn(h, memory, mask=memory_mask, need_weights=need_weights,
                                                    cache=cross_cache)
            return out

        x = residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)
        x = residual(x, cross_attention, self.norm2, self.dropout2, self.norm_first)
        x = residual(x, self.ff, self.norm3, self.dropout3, self.norm_first)
        return x, (weights["self"], weights["cross"])
