"""Plots: an attention heatmap labelled with tokens, a grid of heads, training curves; the book's colours."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from torch import Tensor

# The book's colours: colour-blind safe (the first tab10 colours, with light tints for boxes), and one colour per
# concept in every figure of a chapter, the schematics (drawn by tools/figures with these very values) and the plots
# of the chapter below them alike: a query is orange in the drawing of attention and in the chart under it.
BLUE = "#1f77b4"
ORANGE = "#ff7f0e"
GREEN = "#2ca02c"
RED = "#d62728"
PURPLE = "#9467bd"
GREY = "#7f7f7f"
LIGHT_BLUE = "#c6dbef"
LIGHT_ORANGE = "#fdd0a2"
LIGHT_GREEN = "#c7e9c0"
LIGHT_GREY = "#e8e8e8"
HEAD_COLOURS = [BLUE, ORANGE, GREEN, PURPLE]  # one per head
COLOURS = {
    "query": ORANGE, "key": BLUE, "value": GREEN,  # chapters 1-4
    "weights": BLUE, "gradients": GREEN, "optimizer state": ORANGE, "activations": PURPLE,  # chapter 16
    "Transformer": BLUE, "count model": GREY, "baseline": GREY,  # trained models against their baselines
}
LIGHT = {BLUE: LIGHT_BLUE, ORANGE: LIGHT_ORANGE, GREEN: LIGHT_GREEN, GREY: LIGHT_GREY}  # a box's tint of a colour


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
               ncols: int = 4, title: str | None = None, head_names: Sequence[str] | None = None,
               colorbar: bool = False, annotate: bool = False, fontsize: float = 7.0,
               panel_size: tuple[float, float] = (3.2, 3.0)) -> plt.Figure:
    """A grid with one heatmap per head of ``weights (h, T, S)``; ``colorbar=True`` adds one colour bar shared by all
    heads (every panel uses the same scale, 0 to 1); ``annotate=True`` writes each weight in its cell (two decimals).
    ``fontsize`` is the size of the token labels (titles and axis labels are a little larger), ``panel_size`` the
    width and height of one head's panel in inches."""
    if weights.dim() != 3:
        raise ValueError(f"plot_heads expects weights of shape (h, T, S), got {tuple(weights.shape)}")
    key_tokens = query_tokens if key_tokens is None else key_tokens
    n_heads = weights.shape[0]
    ncols = min(ncols, n_heads)
    nrows = math.ceil(n_heads / ncols)
    width, height = panel_size
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             layout="constrained")
    for head, ax in enumerate(axes.flat):
        if head >= n_heads:
            ax.axis("off")
            continue
        w = _as_matrix(weights[head], "plot_heads")
        image = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=fontsize)
        ax.set_yticks(range(len(query_tokens)), query_tokens, fontsize=fontsize)
        ax.set_title(head_names[head] if head_names else f"head {head}", fontsize=fontsize + 2)
        ax.set_xlabel("key", fontsize=fontsize + 1)
        ax.set_ylabel("query", fontsize=fontsize + 1)
        if annotate:
            for i in range(w.shape[0]):
                for j in range(w.shape[1]):
                    ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=fontsize,
                            color="white" if w[i, j] > 0.6 else "black")
    if colorbar:
        bar = fig.colorbar(image, ax=axes, shrink=0.9)
        bar.set_label("attention weight", fontsize=fontsize + 1)
        bar.ax.tick_params(labelsize=fontsize)
    if title:
        fig.suptitle(title, fontsize=fontsize + 4)
    return fig


def plot_curves(history: dict[str, list[float]], ax: plt.Axes | None = None, title: str | None = None,
                smooth: int = 20, log: bool = True) -> plt.Axes:
    """Training loss (a running mean over ``smooth`` steps) and held-out loss against the step, from
    :func:`tfm.train`'s history (held-out points appear when it was given ``evaluate``)."""
    if not history.get("loss"):
        raise ValueError("plot_curves needs a history with a non-empty 'loss' list, as tfm.train returns")
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1, got {smooth}")
    loss = torch.tensor(history["loss"], dtype=torch.float64)  # (steps,)
    window = min(smooth, len(loss))
    running = loss.cumsum(0)  # (steps,)
    running[window:] = running[window:] - running[:-window].clone()
    running = running / torch.arange(1, len(loss) + 1).clamp(max=window)  # (steps,): mean of the last `window`
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.2), layout="constrained")
    ax.plot(range(1, len(loss) + 1), running.numpy(), label=f"training (mean of {window} steps)")
    if history.get("eval_loss"):
        ax.plot(history["eval_step"], history["eval_loss"], "o-", markersize=3, label="held-out")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


def plot_architecture(decoder: bool = True, ax: plt.Axes | None = None) -> plt.Axes:
    """Block diagram of the encoder stack (and the decoder stack), marking where each mask applies (post-LN)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(9 if decoder else 4.8, 6.2))
    boxes = [  # (x, y, text, colour)
        (0.0, 0.00, "source tokens + positions", "#eeeeee"),
        (0.0, 0.18, "multi-head self-attention\nmask: source padding", "#fde2c8"),
        (0.0, 0.34, "add & LayerNorm", "#e8eef8"),
        (0.0, 0.48, "feed-forward network", "#d9f0d3"),
        (0.0, 0.64, "add & LayerNorm", "#e8eef8"),
    ]
    if decoder:
        boxes += [
            (1.15, 0.00, "target tokens (shifted) + positions", "#eeeeee"),
            (1.15, 0.18, "masked multi-head self-attention\nmask: causal AND target padding", "#fde2c8"),
            (1.15, 0.34, "add & LayerNorm", "#e8eef8"),
            (1.15, 0.48, "multi-head cross-attention\nmask: source padding (T x S)", "#fbd0d9"),
            (1.15, 0.64, "add & LayerNorm", "#e8eef8"),
            (1.15, 0.76, "feed-forward network + add & LayerNorm", "#d9f0d3"),
            (1.15, 0.92, "linear (tied) -> logits over n_vocab", "#eeeeee"),
        ]
    for x, y, text, colour in boxes:
        ax.add_patch(plt.Rectangle((x, y), 1.0, 0.1, facecolor=colour, edgecolor="black", lw=1))
        ax.text(x + 0.5, y + 0.05, text, ha="center", va="center", fontsize=8)
    for column in {x for x, *_ in boxes}:
        ys = sorted(y for x, y, *_ in boxes if x == column)
        for low, high in zip(ys[:-1], ys[1:], strict=True):
            ax.annotate("", xy=(column + 0.5, high), xytext=(column + 0.5, low + 0.1), arrowprops={"arrowstyle": "->"})
    ax.add_patch(plt.Rectangle((-0.05, 0.14), 1.1, 0.63, fill=False, ls="--", edgecolor="gray"))
    ax.text(-0.08, 0.45, "encoder layer × N", rotation=90, ha="center", va="center", fontsize=9)
    if decoder:
        ax.add_patch(plt.Rectangle((1.10, 0.14), 1.1, 0.75, fill=False, ls="--", edgecolor="gray"))
        ax.text(2.28, 0.51, "decoder layer × N", rotation=90, ha="center", va="center", fontsize=9)
        ax.annotate("", xy=(1.15, 0.53), xytext=(0.5, 0.74), arrowprops={"arrowstyle": "->", "color": "tab:red"})
        ax.text(0.5, 0.80, "encoder output = memory\n(keys and values of cross-attention)", color="tab:red",
                ha="center", fontsize=8)
    ax.set_xlim(-0.15, 2.35 if decoder else 1.1)
    ax.set_ylim(-0.03, 1.05)
    ax.axis("off")
    ax.set_title("The Transformer (post-LN, as in the paper)" if decoder else "The encoder (post-LN)")
    return ax


SCHEMATICS = Path(__file__).resolve().parent / "schematics"


def schematic_names() -> list[str]:
    """The schematic figures that ship with tfm (drawn by the repository's tools/figures/)."""
    return sorted(p.stem for p in SCHEMATICS.glob("*.svg"))


def schematic(name: str):
    """One of the book's schematic figures as an SVG image that Jupyter, Colab and the website all display.

    The figures ship inside the package, so a chapter opened alone (in Colab, without the repository) shows them too.
    """
    path = SCHEMATICS / f"{name}.svg"
    if not path.is_file():
        raise ValueError(f"no schematic named {name!r}; the schematics are {schematic_names()}")
    from IPython.display import SVG

    return SVG(filename=str(path))
