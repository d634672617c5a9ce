"""Plots: an attention heatmap labelled with tokens, and a grid of heads."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from torch import Tensor


def _as_matrix(weights: Tensor, what: str):
    w = weights.detach().float().cpu() if isinstance(weights, Tensor) else torch.as_tensor(weights, dtype=torch.float)
    if w.dim() != 2:
        raise ValueError(f"{what} expects a (T, S) matrix of attention weights, got shape {tuple(w.shape)}")
    return w.numpy()


def plot_attention(weights: Tensor, query_tokens: Sequence[str], key_tokens: Sequence[str] | None = None,
                   ax: plt.Axes | None = None, title: str | None = None, annotate: bool = False,
                   cmap: str = "Blues", vmax: float | None = 1.0) -> plt.Axes:
    """Heatmap of ``weights (T, S)``: row = query token (who asks), column = key token (who is looked at)."""
    key_tokens = query_tokens if key_tokens is None else key_tokens
    w = _as_matrix(weights, "plot_attention")
    if w.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"weights have shape {w.shape} but there are {len(query_tokens)} query and {len(key_tokens)} key labels"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.5 * len(key_tokens) + 2, 0.45 * len(query_tokens) + 1.2))
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90)
    ax.set_yticks(range(len(query_tokens)), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if w[i, j] > 0.6 * (vmax or w.max()) else "black")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    return ax


def plot_heads(weights: Tensor, query_tokens: Sequence[str], key_tokens: Sequence[str] | None = None,
               ncols: int = 4, title: str | None = None, head_names: Sequence[str] | None = None) -> plt.Figure:
    """A grid with one heatmap per head of ``weights (h, T, S)``."""
    if weights.dim() != 3:
        raise ValueError(f"plot_heads expects weights of shape (h, T, S), got {tuple(weights.shape)}")
    key_tokens = query_tokens if key_tokens is None else key_tokens
    n_heads = weights.shape[0]
    ncols = min(ncols, n_heads)
    nrows = math.ceil(n_heads / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.0 * nrows), squeeze=False, layout="constrained")
    for head, ax in enumerate(axes.flat):
        if head >= n_heads:
            ax.axis("off")
            continue
        w = _as_matrix(weights[head], "plot_heads")
        ax.imshow(w, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(len(query_tokens)), query_tokens, fontsize=7)
        ax.set_title(head_names[head] if head_names else f"head {head}", fontsize=9)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    if title:
        fig.suptitle(title)
    return fig
