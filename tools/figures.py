"""Draw the book's schematic figures as SVG files in src/tfm/schematics/ (shipped with tfm: `tfm.viz.schematic`).

Run `python tools/figures.py` (or `make figures`) to redraw every figure. Each figure is one function below; change it
and redraw. The output is deterministic (fixed SVG ids, no date, text kept as text), so a redraw that changes nothing
leaves the files byte-identical. Glyphs are drawn as paths so that no browser substitutes a font and shifts
the layout; the alt text and caption in the chapter carry the words.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("svg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

# Inside the package, so that a chapter opened alone in Colab (tfm installed, no repository) can show them.
ASSETS = Path(__file__).resolve().parent.parent / "src" / "tfm" / "schematics"

plt.rcParams.update(
    {
        "svg.hashsalt": "tfm",
        "svg.fonttype": "path",  # glyphs as paths: the figure looks the same in every browser
        "font.family": "DejaVu Sans",
        "font.size": 11,
        "mathtext.fontset": "dejavusans",
    }
)

# Colour-blind-safe colours: the first tab10 colours and light tints of them.
BLUE = "#1f77b4"
ORANGE = "#ff7f0e"
GREEN = "#2ca02c"
GREY = "#7f7f7f"
LIGHT_BLUE = "#c6dbef"
LIGHT_ORANGE = "#fdd0a2"
LIGHT_GREEN = "#c7e9c0"
LIGHT_GREY = "#e8e8e8"
HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]  # tab10, one per head


FONT_SCALE = {"scale": 1.0}


def fs(points: float) -> float:
    """A font size scaled for the current figure: a wide figure is shrunk to the page width, so its text is enlarged."""
    return points * FONT_SCALE["scale"]


def new_figure(width: float, height: float, font_scale: float = 1.0):
    """A figure whose axes span it, in data units equal to inches (so boxes keep their proportions)."""
    FONT_SCALE["scale"] = font_scale
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def save(fig, name: str) -> None:
    ASSETS.mkdir(exist_ok=True)
    fig.savefig(ASSETS / name, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    print(f"wrote src/tfm/schematics/{name}")


def box(ax, x, y, w, h, text="", face="white", edge="black", size=11, lw=1.2, colour="black", **kwargs):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, linewidth=lw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fs(size), color=colour, **kwargs)


def arrow(ax, start, end, colour="black", lw=1.2, style="-|>", rad=0.0):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=style,
            mutation_scale=12,
            color=colour,
            linewidth=lw,
            connectionstyle=f"arc3,rad={rad}",
            shrinkA=2,
            shrinkB=2,
        )
    )


def grid(ax, x, y, rows, cols, cell, face="white", highlight_row=None, highlight_col=None, hl_face=LIGHT_BLUE,
         values=None, size=9, colours=None):
    """A rows x cols grid of cells with its top-left corner at (x, y); optional values (strings) in the cells."""
    for i in range(rows):
        for j in range(cols):
            fc = face
            if colours is not None:
                fc = colours[i][j]
            if highlight_row is not None and i == highlight_row:
                fc = hl_face
            if highlight_col is not None and j == highlight_col:
                fc = hl_face
            ax.add_patch(Rectangle((x + j * cell, y - (i + 1) * cell), cell, cell, facecolor=fc,
                                   edgecolor="black", linewidth=0.8))
            if values is not None:
                ax.text(x + (j + 0.5) * cell, y - (i + 0.5) * cell, values[i][j], ha="center", va="center",
                        fontsize=fs(size))


# --------------------------------------------------------------------------------------------------------------------
# a. Chapter 1: one query token's path through attention (indices t = 0..4 as in chapter 1).
# --------------------------------------------------------------------------------------------------------------------
def qkv_flow() -> None:
    # Chapter 1's worked example ("dogs chase the red ball"): its embeddings X, projections, and the query of
    # "chase" (row 1). Every number drawn is computed here from X and the matrices, as chapter 1 computes it.
    tokens = ["dogs", "chase", "the", "red", "ball"]
    X = [[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0.5, 0, 0, 0.5], [1, 0, 0, 0]]
    W_Q = [[-1, -0.5], [0, 1], [1, 1], [2, -1]]
    W_K = [[1, 0], [0, 1], [-1, 1], [-1, -1]]
    W_V = [[1, 0], [0, 1], [0, 1], [0, 0]]
    query_index = 1

    def times(x, W):  # a row times a 4 x 2 matrix
        return [sum(x[i] * W[i][j] for i in range(4)) for j in range(2)]

    def pair(v, fmt="g"):
        return "(" + ", ".join(format(c + 0.0, fmt).replace("-", "\u2212") for c in v) + ")"

    q = times(X[query_index], W_Q)
    keys = [times(x, W_K) for x in X]
    values = [times(x, W_V) for x in X]
    dots = [sum(a * b for a, b in zip(q, k, strict=True)) for k in keys]
    scores = [d / math.sqrt(2) for d in dots]
    exps = [math.exp(s) for s in scores]
    weights = [e / sum(exps) for e in exps]  # 0.51, 0.12, 0.03, 0.09, 0.25, as printed in chapter 1
    weighted = [[a * c for c in v] for a, v in zip(weights, values, strict=True)]
    output = [sum(w[j] for w in weighted) for j in range(2)]  # (0.80, 0.63)
    fig, ax = new_figure(11.4, 5.8, font_scale=1.1)
    n = len(tokens)
    top = 4.5
    step = 0.78
    ys = [top - i * step for i in range(n)]

    # Column headings.
    heads = [(0.65, "token"), (2.2, "key $k_t$"), (4.05, "score\n$q \\cdot k_t / \\sqrt{d_k}$"),
             (5.95, "weight $a_t$"), (7.75, "value $v_t$"), (9.85, "$a_t\\,v_t$")]
    for x, text in heads:
        ax.text(x, top + 0.62, text, ha="center", va="bottom", fontsize=fs(11), fontweight="bold")

    # The query, drawn below the token column.
    query_note = (f"query of \u201c{tokens[query_index]}\u201d:  $q = x\\,W_Q$ = {pair(q)},\n"
                  "the same $q$ in every row")
    ax.text(0.1, ys[-1] - 0.66, query_note, ha="left", va="center", fontsize=fs(10), color=ORANGE)

    for j, (tok, y, a) in enumerate(zip(tokens, ys, weights, strict=True)):
        is_query = j == query_index
        box(ax, 0.1, y - 0.28, 1.1, 0.56, f"\u201c{tok}\u201d", face=LIGHT_ORANGE if is_query else LIGHT_GREY)
        box(ax, 1.65, y - 0.28, 1.1, 0.56, pair(keys[j]), face=LIGHT_BLUE, size=10)
        arrow(ax, (1.2, y), (1.65, y))
        dot = format(dots[j], "g").replace("-", "\u2212")
        score = format(scores[j], ".2f").replace("-", "\u2212")
        box(ax, 3.2, y - 0.28, 1.7, 0.56, f"{dot}/$\\sqrt{{2}}$ = {score}", face="white", size=10)
        arrow(ax, (2.75, y), (3.2, y))
        # weight bar: width proportional to a_t
        ax.add_patch(Rectangle((5.3, y - 0.2), 1.1, 0.4, facecolor="white", edgecolor=GREY, linewidth=0.8))
        ax.add_patch(Rectangle((5.3, y - 0.2), 1.1 * a / max(weights), 0.4, facecolor=ORANGE, edgecolor="none"))
        ax.text(6.45, y, f"{a:.2f}", ha="left", va="center", fontsize=fs(10))
        box(ax, 7.2, y - 0.28, 1.1, 0.56, pair(values[j]), face=LIGHT_GREEN, size=10)
        ax.text(8.65, y, "\u00d7 $a_t$", ha="center", va="center", fontsize=fs(10))
        box(ax, 9.05, y - 0.28, 1.6, 0.56, pair(weighted[j], ".2f"), face=LIGHT_GREEN, size=10)

    # Softmax bracket spanning the score column into the weight column.
    ax.text(5.1, ys[-1] - 0.66, "softmax over $t$", ha="center", va="center", fontsize=fs(10), color=ORANGE)
    ax.plot([5.05, 5.12, 5.12, 5.05], [ys[0] + 0.3, ys[0] + 0.3, ys[-1] - 0.3, ys[-1] - 0.3], color=ORANGE, lw=1.2)

    # The output: sum of the last column.
    ax.plot([10.75, 10.85, 10.85, 10.75], [ys[0] + 0.3, ys[0] + 0.3, ys[-1] - 0.3, ys[-1] - 0.3], color="black",
            lw=1.2)
    ax.text(9.6, ys[-1] - 0.66, f"sum:  $z = \\sum_t a_t\\,v_t$ = {pair(output, '.2f')}", ha="center", va="center",
            fontsize=fs(11), fontweight="bold")
    ax.text(9.6, ys[-1] - 1.1, "weights $a_t \\geq 0$ sum to 1", ha="center", va="center", fontsize=fs(10),
            color=GREY)
    save(fig, "qkv_flow.svg")


# --------------------------------------------------------------------------------------------------------------------
# b. Chapter 2: the same computation as matrix products.
# --------------------------------------------------------------------------------------------------------------------
def scores_matrix() -> None:
    fig, ax = new_figure(11.0, 4.6, font_scale=1.25)
    c = 0.32  # cell size
    T, S, dk, dv = 4, 5, 3, 3
    row, col = 1, 3  # the highlighted query row and key column
    top = 3.5

    def label(x, w, name, shape):
        ax.text(x + w / 2, top + 0.18, name, ha="center", va="bottom", fontsize=fs(13))
        ax.text(x + w / 2, top - 0.15 - max(T, dk) * c - 0.05, shape, ha="center", va="top", fontsize=fs(10))

    def op(x, text):
        ax.text(x, top - 2 * c, text, ha="center", va="center", fontsize=fs(14))

    x = 0.3
    grid(ax, x, top, T, dk, c, face=LIGHT_GREY, highlight_row=row, hl_face=LIGHT_ORANGE)
    label(x, dk * c, "$Q$", "$(T, d_k)$")
    x += dk * c + 0.35
    op(x - 0.17, "\u00d7")
    grid(ax, x, top, dk, S, c, face=LIGHT_GREY, highlight_col=col, hl_face=LIGHT_BLUE)
    label(x, S * c, "$K^\\top$", "$(d_k, S)$")
    x += S * c + 0.45
    op(x - 0.22, "=")
    colours = [[LIGHT_GREY] * S for _ in range(T)]
    colours[row][col] = GREEN
    grid(ax, x, top, T, S, c, colours=colours)
    label(x, S * c, "scores $Q K^\\top / \\sqrt{d_k}$", "$(T, S)$")
    x += S * c + 1.1
    arrow(ax, (x - 0.95, top - 2 * c), (x - 0.15, top - 2 * c))
    ax.text(x - 0.55, top - 2 * c + 0.15, "softmax\nrow by row", ha="center", va="bottom", fontsize=fs(9))
    grid(ax, x, top, T, S, c, face=LIGHT_GREY, highlight_row=row, hl_face=LIGHT_ORANGE)
    label(x, S * c, "$A$", "$(T, S)$, rows sum to 1")
    x += S * c + 0.35
    op(x - 0.17, "\u00d7")
    grid(ax, x, top, S, dv, c, face=LIGHT_GREEN)
    ax.text(x + dv * c / 2, top + 0.18, "$V$", ha="center", va="bottom", fontsize=fs(13))
    ax.text(x + dv * c / 2, top - S * c - 0.1, "$(S, d_v)$", ha="center", va="top", fontsize=fs(10))
    x += dv * c + 0.45
    op(x - 0.22, "=")
    grid(ax, x, top, T, dv, c, face=LIGHT_GREY, highlight_row=row, hl_face=LIGHT_ORANGE)
    label(x, dv * c, "$Z$", "$(T, d_v)$")

    # Explain the highlighted cells: a colour key instead of arrows that would cross the grids.
    ax.add_patch(Rectangle((0.3, 0.95), 0.24, 0.24, facecolor=GREEN, edgecolor="black", linewidth=0.8))
    ax.text(0.7, 1.07,
            "one score $q_i \\cdot k_j$ = row $i$ of $Q$ $\\cdot$ column $j$ of $K^\\top$: how much query $i$ attends"
            " to key $j$",
            ha="left", va="center", fontsize=fs(11))
    ax.add_patch(Rectangle((0.3, 0.41), 0.24, 0.24, facecolor=LIGHT_ORANGE, edgecolor="black", linewidth=0.8))
    ax.text(0.7, 0.53, "row $i$ of $A$ (its weights over the $S$ keys) mixes the rows of $V$ into row $i$ of $Z$",
            ha="left", va="center", fontsize=fs(11))
    save(fig, "scores_matrix.svg")


# --------------------------------------------------------------------------------------------------------------------
# c. Chapter 3: splitting d_model into h heads and joining them again.
# --------------------------------------------------------------------------------------------------------------------
def head_split() -> None:
    h, dk, T = 4, 2, 3
    c = 0.2
    fig, ax = new_figure(9.8, 5.6, font_scale=1.2)
    mid = 3.7  # vertical centre of the main row
    top = mid + T * c / 2

    def slab(x, y, colours, title, shape):
        """A (T, d_model) slab with its top-left corner at (x, y)."""
        grid(ax, x, y, T, h * dk, c, colours=colours)
        ax.text(x + h * dk * c / 2, y + 0.12, title, ha="center", va="bottom", fontsize=fs(10))
        ax.text(x + h * dk * c / 2, y - T * c - 0.1, shape, ha="center", va="top", fontsize=fs(10))
        return x + h * dk * c

    def step(x0, x1, text, above=False):
        arrow(ax, (x0 + 0.08, mid), (x1 - 0.08, mid))
        y, va = (mid + 0.1, "bottom") if above else (mid - 0.12, "top")
        ax.text((x0 + x1) / 2, y, text, ha="center", va=va, fontsize=fs(10))

    by_head = [[HEAD_COLOURS[j // dk] for j in range(h * dk)] for _ in range(T)]

    # 1. input (B, T, d_model): the columns fall into h blocks of d_k
    x = 0.2
    end = slab(x, top, by_head, "$d_{\\mathrm{model}} = h \\cdot d_k$", "$(B, T, d_{\\mathrm{model}})$")
    ax.text(x, top + 0.75, "projected $Q$ (the same for $K$ and $V$)", ha="left", va="bottom", fontsize=fs(11),
            fontweight="bold")

    # 2. view: the same numbers, last axis read as (h, d_k)
    x2 = end + 0.8
    step(end, x2, "view")
    for k in range(h):
        grid(ax, x2 + k * (dk * c + 0.08), top, T, dk, c, face=HEAD_COLOURS[k])
    end2 = x2 + h * (dk * c + 0.08) - 0.08
    ax.text((x2 + end2) / 2, top + 0.12, "$h$ blocks of $d_k$", ha="center", va="bottom", fontsize=fs(10))
    ax.text((x2 + end2) / 2, top - T * c - 0.1, "$(B, T, h, d_k)$", ha="center", va="top", fontsize=fs(10))

    # 3. transpose: heads become a batch-like axis, each head a (T, d_k) matrix
    x3 = end2 + 1.1
    step(end2, x3, "transpose\n(1, 2)")
    gap = 0.12
    stack_top = mid + (h * T * c + (h - 1) * gap) / 2
    for k in range(h):
        y = stack_top - k * (T * c + gap)
        grid(ax, x3, y, T, dk, c, face=HEAD_COLOURS[k])
        ax.text(x3 + dk * c + 0.08, y - T * c / 2, f"head {k}", ha="left", va="center", fontsize=fs(9))
    stack_bottom = stack_top - h * T * c - (h - 1) * gap
    ax.text(x3 + 0.4, stack_bottom - 0.1, "$(B, h, T, d_k)$", ha="center", va="top", fontsize=fs(10))

    # 4. attention in every head at once (the head axis acts like a batch axis)
    x4 = x3 + 1.45
    arrow(ax, (x3 + 0.95, mid), (x4 - 0.08, mid))
    box(ax, x4, mid - 0.7, 2.4, 1.4, "attention in\neach head\n$\\mathrm{softmax}(QK^\\top/\\sqrt{d_k})\\,V$",
        size=10)
    ax.text(x4 + 1.2, mid - 0.8, "$(B, h, T, d_k)$", ha="center", va="top", fontsize=fs(10))

    # 5. transpose back and reshape: heads side by side again (drawn below the attention box)
    centre = x4 + 1.2
    x5 = centre - h * dk * c / 2
    top5 = mid - 1.85
    arrow(ax, (centre, mid - 1.1), (centre, top5 + 0.08))
    ax.text(centre + 0.12, (mid - 1.1 + top5) / 2, "transpose,\nreshape", ha="left", va="center", fontsize=fs(10))
    grid(ax, x5, top5, T, h * dk, c, colours=by_head)
    ax.text(centre, top5 - T * c - 0.1, "heads concatenated\n$(B, T, d_{\\mathrm{model}})$", ha="center", va="top",
            fontsize=fs(10))

    # 6. W_O mixes the heads
    x6 = x5 - h * dk * c - 1.3
    arrow(ax, (x5 - 0.08, top5 - T * c / 2), (x6 + h * dk * c + 0.08, top5 - T * c / 2))
    ax.text(x5 - 0.65, top5 - T * c / 2 + 0.1, "$\\cdot\\, W_O$", ha="center", va="bottom", fontsize=fs(11))
    grid(ax, x6, top5, T, h * dk, c, face=LIGHT_GREY)
    ax.text(x6 + h * dk * c / 2, top5 - T * c - 0.1, "output\n$(B, T, d_{\\mathrm{model}})$", ha="center", va="top",
            fontsize=fs(10))

    ax.text(0.2, 0.3,
            f"Example: $h = {h}$ heads, $d_k = {dk}$, $d_{{\\mathrm{{model}}}} = {h * dk}$, $T = {T}$ tokens,"
            " one batch element shown.\nColours mark the heads; $W_O$ mixes them (grey).",
            ha="left", va="center", fontsize=fs(10))
    save(fig, "head_split.svg")


# --------------------------------------------------------------------------------------------------------------------
# d. Chapter 4: combining a padding mask and a causal mask, and what softmax makes of them.
# --------------------------------------------------------------------------------------------------------------------
def mask_pipeline() -> None:
    # Chapter 4's worked example: the short sentence "dogs chase ball" padded to 4 with a zero vector, with chapter 1's
    # embeddings and projections. Every number drawn is computed here, as chapter 4 computes it.
    tokens = ["dogs", "chase", "ball", "pad"]
    X = [[1, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]  # the padding token is a zero vector
    W_Q = [[-1, -0.5], [0, 1], [1, 1], [2, -1]]
    W_K = [[1, 0], [0, 1], [-1, 1], [-1, -1]]

    def times(x, W):  # a row times a 4 x 2 matrix
        return [sum(x[i] * W[i][j] for i in range(4)) for j in range(2)]

    queries, keys = [times(x, W_Q) for x in X], [times(x, W_K) for x in X]
    scores = [[(q[0] * k[0] + q[1] * k[1]) / math.sqrt(2) for k in keys] for q in queries]  # Q K^T / sqrt(d_k)
    S = T = 4
    c = 0.5
    pad = [True, True, True, False]  # the last key is padding
    causal = [[j <= i for j in range(S)] for i in range(T)]
    combined = [[causal[i][j] and pad[j] for j in range(S)] for i in range(T)]
    fig, ax = new_figure(9.5, 9.0)
    w = S * c
    col1, col2, col3 = 1.0, 4.15, 7.3
    top1, top2 = 6.6, 3.4  # top edges of the two rows of 4 x 4 grids

    def tf(m):
        return [["T" if v else "F" for v in r] for r in m]

    def tf_colours(m):
        return [[LIGHT_BLUE if v else LIGHT_ORANGE for v in r] for r in m]

    def number(v):
        return format(v + 0.0, ".2f").replace("-", "\u2212")

    def titled(x, top, rows, title, shape, note="", lift=0.12):
        ax.text(x + w / 2, top + lift, title, ha="center", va="bottom", fontsize=fs(11))
        ax.text(x + w / 2, top - rows * c - 0.1, shape, ha="center", va="top", fontsize=fs(11))
        if note:
            ax.text(x + w / 2, top - rows * c - 0.45, note, ha="center", va="top", fontsize=fs(10), color=GREY)

    def key_labels(x, top):
        for j, token in enumerate(tokens):
            ax.text(x + (j + 0.5) * c, top + 0.06, token, ha="center", va="bottom", fontsize=fs(9), color=GREY)

    def query_labels(x, top):
        for i, token in enumerate(tokens):
            ax.text(x - 0.08, top - (i + 0.5) * c, token, ha="right", va="center", fontsize=fs(10), color=GREY)

    # Row 1: the two masks and their combination.
    pad_top = top1 + 1.55
    grid(ax, col1, pad_top, 1, S, c, values=tf([pad]), colours=tf_colours([pad]), size=11)
    key_labels(col1, pad_top)
    titled(col1, pad_top, 1, "padding mask, row $b$", "$(B, S) \\to (B, 1, 1, S)$", lift=0.38)
    grid(ax, col1, top1, T, S, c, values=tf(causal), colours=tf_colours(causal), size=11)
    query_labels(col1, top1)
    titled(col1, top1, T, "causal mask", "$(T, S)$")
    grid(ax, col2, top1, T, S, c, values=tf(combined), colours=tf_colours(combined), size=11)
    titled(col2, top1, T, "combined mask", "$(B, 1, T, S)$", "broadcasts over $h$")
    arrow(ax, (col1 + w + 0.1, top1 - 2 * c), (col2 - 0.08, top1 - 2 * c))
    arrow(ax, (col1 + w + 0.1, pad_top - c / 2), (col2 - 0.08, top1 - 1.2 * c), rad=-0.15)
    ax.text((col1 + w + col2) / 2, top1 - 2 * c - 0.12, "logical\nand", ha="center", va="top", fontsize=fs(10))

    # Row 2: scores, masked scores, weights.
    grid(ax, col1, top2, T, S, c, values=[[number(v) for v in r] for r in scores], face=LIGHT_GREY, size=10)
    key_labels(col1, top2)
    query_labels(col1, top2)
    titled(col1, top2, T, "scores $QK^\\top / \\sqrt{d_k}$", "$(B, h, T, S)$", lift=0.38)
    masked = [[number(scores[i][j]) if combined[i][j] else "$-\\infty$" for j in range(S)] for i in range(T)]
    colours = [[LIGHT_GREY if combined[i][j] else LIGHT_ORANGE for j in range(S)] for i in range(T)]
    grid(ax, col2, top2, T, S, c, values=masked, colours=colours, size=10)
    titled(col2, top2, T, "masked scores", "$(B, h, T, S)$")
    arrow(ax, (col1 + w + 0.08, top2 - 2 * c), (col2 - 0.08, top2 - 2 * c))
    ax.text((col1 + w + col2) / 2, top2 - 2 * c + 0.1, "mask F:\n$-\\infty$", ha="center", va="bottom", fontsize=fs(10))

    weights = []
    for i in range(T):
        e = [math.exp(scores[i][j]) if combined[i][j] else 0.0 for j in range(S)]
        weights.append([v / sum(e) for v in e])
    values = [[f"{v:.2f}" if v > 0 else "0" for v in r] for r in weights]
    colours = [[LIGHT_GREEN if v > 0 else "white" for v in r] for r in weights]
    grid(ax, col3, top2, T, S, c, values=values, colours=colours, size=10)
    titled(col3, top2, T, "attention weights $A$", "$(B, h, T, S)$", "each row sums to 1")
    arrow(ax, (col2 + w + 0.08, top2 - 2 * c), (col3 - 0.08, top2 - 2 * c))
    ax.text((col2 + w + col3) / 2, top2 - 2 * c + 0.1, "softmax\nover $S$", ha="center", va="bottom",
            fontsize=fs(10))

    note = ("T = may attend, F = may not (tfm's convention). Rows are queries, columns keys: "
            "\u201cdogs chase ball\u201d\nand one padding token, with chapter 1's $X$, $W_Q$, $W_K$. "
            "Query $i$ sees the keys $j \\leq i$ that are\nnot padding; every masked entry gets weight exactly 0.")
    ax.text(0.3, 0.35, note, ha="left", va="center", fontsize=fs(11))
    save(fig, "mask_pipeline.svg")


FIGURES = [qkv_flow, scores_matrix, head_split, mask_pipeline]


def main() -> None:
    import figures_model  # the model chapters' schematics (imported here: it imports this module's helpers)

    for draw in FIGURES + figures_model.FIGURES:
        draw()


if __name__ == "__main__":
    main()
