"""Schematics of the part "Language models today" (chapter 15), drawn with the helpers of style.py. `python -m
tools.figures` draws every figure.
"""

from __future__ import annotations

from matplotlib.patches import Circle, Rectangle

from tools.figures.model import DM, LIGHT_PURPLE, residual_add
from tools.figures.style import (
    GREY,
    LIGHT_BLUE,
    LIGHT_GREEN,
    LIGHT_ORANGE,
    ORANGE,
    arrow,
    fs,
    new_figure,
    save,
)


def _box(ax, cx, y, w, h, title, detail, face, changed=None):
    """A box centred on cx with a bold title and a smaller line of detail; ``changed`` lists the numbers of the
    changes it shows (an orange outline and numbered badges on the right)."""
    edge, lw = (ORANGE, 2.4) if changed else ("black", 1.2)
    ax.add_patch(Rectangle((cx - w / 2, y), w, h, facecolor=face, edgecolor=edge, linewidth=lw))
    ax.text(cx, y + (h * 0.66 if detail else h / 2), title, ha="center", va="center", fontsize=fs(11),
            fontweight="bold")
    if detail:
        ax.text(cx, y + h * 0.28, detail, ha="center", va="center", fontsize=fs(9.5))
    for k, number in enumerate(changed or ()):
        _badge(ax, cx + w / 2 + 0.2 + 0.34 * k, y + h / 2, number)


def _badge(ax, x, y, number, r=0.15):
    ax.add_patch(Circle((x, y), r, facecolor=ORANGE, edgecolor="none"))
    ax.text(x, y, str(number), ha="center", va="center", fontsize=fs(9.5), color="white", fontweight="bold")


def block_2017_vs_today() -> None:
    """The 2017 block as GPT-2 arranged it (pre-LN) and the Llama-style block, side by side, the changes numbered."""
    fig, ax = new_figure(12.4, 10.8, font_scale=1.25)
    bw, bh, nh, gap = 4.1, 0.8, 0.62, 0.3  # box width, sub-layer and norm heights, gap between boxes
    columns = [
        (2.75, "2017 block, arranged as in GPT-2", "pre-LN, GELU, learned positions, biases", False, [
            ("embed", "token embedding + position table", "learned vector per position, added", LIGHT_BLUE, bh, ()),
            "branch",
            ("norm", "LayerNorm", "subtract mean, divide by std; $\\gamma, \\beta$", LIGHT_PURPLE, nh, ()),
            ("sub", "multi-head self-attention", "$h$ heads of $Q, K, V$; biases", LIGHT_ORANGE, bh, ()),
            "add", "branch",
            ("norm", "LayerNorm", "subtract mean, divide by std; $\\gamma, \\beta$", LIGHT_PURPLE, nh, ()),
            ("sub", "feed-forward network", "$\\mathrm{GELU}(xW_1 + b_1)W_2 + b_2$, $d_{ff} = 4" + DM + "$",
             LIGHT_GREEN, bh, ()),
            "add",
            ("final", "final LayerNorm", "", LIGHT_PURPLE, nh, ()),
        ]),
        (8.85, "Llama-style block (Llama 2 and 3, Mistral, Qwen)", "what this chapter builds", True, [
            ("embed", "token embedding", "no position table", LIGHT_BLUE, bh, (3,)),
            "branch",
            ("norm", "RMSNorm", "divide by the root mean square; $g$ only", LIGHT_PURPLE, nh, (1,)),
            ("sub", "grouped-query self-attention", "RoPE on $q, k$; $h_{kv} \\leq h$ heads of $K, V$; no biases",
             LIGHT_ORANGE, bh, (3, 4)),
            "add", "branch",
            ("norm", "RMSNorm", "divide by the root mean square; $g$ only", LIGHT_PURPLE, nh, (1,)),
            ("sub", "SwiGLU feed-forward", "$(\\mathrm{SiLU}(xW_g) \\odot xW_u)W_d$, $d_{ff} \\approx \\frac{2}{3}"
             "\\cdot 4" + DM + "$", LIGHT_GREEN, bh, (2,)),
            "add",
            ("final", "final RMSNorm", "", LIGHT_PURPLE, nh, (1,)),
        ]),
    ]
    y_in = 1.45
    for cx, title, subtitle, today, items in columns:
        ax.text(cx, 10.65, title, ha="center", va="top", fontsize=fs(12.5), fontweight="bold")
        ax.text(cx, 10.2, subtitle, ha="center", va="top", fontsize=fs(10.5), color="#444444")
        ax.text(cx, y_in - 0.15, "token ids $(B, T)$", ha="center", va="top", fontsize=fs(10.5))
        prev_top, y = y_in - 0.1, y_in + 0.25
        frame_bottom = frame_top = None
        for item in items:
            if item == "branch":  # the residual leaves the main line just below the next box
                branch = y - gap / 2
                if frame_bottom is None:
                    frame_bottom = branch - 0.12
                continue
            if item == "add":
                prev_top = residual_add(ax, cx, y, prev_top, branch, xr=cx - bw / 2 - 0.3)
                y = prev_top + gap
                frame_top = prev_top + 0.12
                continue
            kind, name, detail, face, h, changed = item
            if kind == "embed":
                y -= 0.1
            if kind == "final":
                y += 0.35  # room for the frame's edge
            arrow(ax, (cx, prev_top), (cx, y))
            w = bw - 0.6 if kind == "norm" or kind == "final" else bw
            _box(ax, cx, y, w, h, name, detail, face, changed if today else None)
            prev_top, y = y + h, y + h + gap + (0.25 if kind == "embed" else 0.0)
        ax.add_patch(Rectangle((cx - bw / 2 - 0.5, frame_bottom), bw + 1.4, frame_top - frame_bottom,
                               facecolor="none", edgecolor=GREY, linewidth=1.2, linestyle="--"))
        ax.text(cx + bw / 2 + 0.97, (frame_bottom + frame_top) / 2, "$\\times N$", ha="left", va="center",
                fontsize=fs(12), fontweight="bold")
        arrow(ax, (cx, prev_top), (cx, y + 0.05))
        ax.text(cx, y + 0.1, "linear layer to $n_{\\mathrm{vocab}}$ logits", ha="center", va="bottom",
                fontsize=fs(10.5))
    legend = [(1, "RMSNorm instead of LayerNorm", 2, "SwiGLU, about 2/3 as wide as the 2017 FFN"),
              (3, "positions: $q$ and $k$ rotated inside attention", 4, "fewer key/value heads (GQA, MQA)")]
    for row, (n1, t1, n2, t2) in enumerate(legend):
        y = 0.72 - 0.3 * row
        for x, n, t in [(0.35, n1, t1), (6.45, n2, t2)]:
            _badge(ax, x, y, n, r=0.12)
            ax.text(x + 0.22, y, t, ha="left", va="center", fontsize=fs(10))
    ax.text(0.3, 0.05, "Unmarked: both are pre-norm with a final norm; the Llama-style block has no biases at all.",
            ha="left", va="bottom", fontsize=fs(10), color="#444444")
    save(fig, "block_2017_vs_today.svg")


FIGURES = [block_2017_vs_today]
