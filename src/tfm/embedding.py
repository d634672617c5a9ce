"""Token embeddings scaled by √d_model (Vaswani et al., 2017, §3.4)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

_INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)


def check_token_ids(ids: Tensor, n_vocab: int, name: str = "token ids") -> None:
    """Raise a clear error unless ``ids`` is a non-empty integer tensor with values in ``[0, n_vocab)``."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(ids).__name__}")
    if ids.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"{name} must be an integer tensor (torch.long), got dtype {ids.dtype}")
    if ids.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(ids.shape)})")
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= n_vocab:
        raise ValueError(f"{name} must lie in [0, {n_vocab}) for a vocabulary of {n_vocab}, found values {low}..{high}")


class TokenEmbedding(nn.Module):
    """Looks up a ``d_model``-vector per token id and multiplies it by √d_model (``scale=False`` turns that off)."""

    def __init__(self, n_vocab: int, d_model: int, padding_idx: int | None = None, scale: bool = True):
        super().__init__()
        self.n_vocab, self.d_model = n_vocab, d_model
        self.embedding = nn.Embedding(n_vocab, d_model, padding_idx=padding_idx)
        self.factor = math.sqrt(d_model) if scale else 1.0

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, ids: Tensor) -> Tensor:
        check_token_ids(ids, self.n_vocab)
        return self.embedding(ids) * self.factor  # (B, T) -> (B, T, d_model)
