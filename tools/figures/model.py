"""Schematics of the model chapters (5, 6, 7, 9, 10), drawn with the helpers of style.py. `python -m tools.figures`
draws every figure.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import to_hex
from matplotlib.patches import Arc, Circle, Rectangle

from tools.figures.style import (
    BLUE,
    GREEN,
    GREY,
    LIGHT_BLUE,
    LIGHT_GREEN,
    LIGHT_GREY,
    LIGHT_ORANGE,
    ORANGE,
    arrow,
    box,
    fs,
    grid,
    new_figure,
    save,
)

LIGHT_PURPLE = "#dadaeb"  # a tint of tab:purple, for LayerNorm
DM = "d_{\\mathrm{model}}"
NV = "n_{\\mathrm{vocab}}"


def line(ax, xs, ys, colour="black", lw=1.2, **kwargs):
    ax.plot(xs, ys, color=colour, lw=lw, solid_capstyle="butt", **kwargs)


def add_node(ax, x, y, r=0.16):
    """The residual addition: a circle with a plus."""
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor="black", linewidth=1.2))
    line(ax, [x - r * 0.6, x + r * 0.6], [y, y])
    line(ax, [x, x], [y - r * 0.6, y + r * 0.6])


def residual_add(ax, cx, y, prev_top, branch, xr):
    """A residual addition drawn at height ``y`` of a stack that grows upwards: the main line from ``prev_top`` into
    the add node, and the residual from the branch point at height ``branch``, round the sub-layer at ``x = xr``, into
    it. Returns the top of the node."""
    yc = y + 0.16
    arrow(ax, (cx, prev_top), (cx, yc - 0.16))
    add_node(ax, cx, yc)
    line(ax, [cx, xr, xr], [branch, branch, yc], colour=BLUE, lw=1.6)
    arrow(ax, (xr, yc), (cx - 0.16, yc), colour=BLUE, lw=1.6)
    ax.add_patch(Circle((cx, branch), 0.045, facecolor=BLUE, edgecolor="none"))
    return yc + 0.16


def frame(ax, x, y, w, h, label):
    """A dashed frame around a layer, with its repeat count on the right."""
    ax.add_patch(Rectangle((x, y), w, h, facecolor="none", edgecolor=GREY, linewidth=1.2, linestyle="--"))
    ax.text(x + w + 0.1, y + h / 2, label, ha="left", va="center", fontsize=fs(12), fontweight="bold")


# --------------------------------------------------------------------------------------------------------------------
# e. Chapter 5: the sinusoidal encoding as waves, and one pair of it as a point turning on a circle.
# --------------------------------------------------------------------------------------------------------------------
def positional_waves() -> None:
    d_model, pairs, last = 32, [0, 1, 3], 30
    width, height = 11.0, 5.4
    fig, ax = new_figure(width, height, font_scale=1.15)

    def omega(i):
        return 10000.0 ** (-2 * i / d_model)

    fine = np.linspace(0, last, 601)
    positions = np.arange(last + 1)
    left, panel_w, bottom, panel_h, gap = 0.75, 5.3, 0.7, 1.05, 0.3
    ax.text(0.1, height - 0.2, f"Sinusoidal encoding, $d_{{\\mathrm{{model}}}} = {d_model}$: three of its"
            f" {d_model // 2} pairs $(2i, 2i+1)$", ha="left", va="top", fontsize=fs(11), fontweight="bold")
    ax.plot([0.2, 0.55], [height - 0.62] * 2, color=BLUE, lw=1.6)
    ax.text(0.62, height - 0.62, "$\\mathrm{PE}_{pos,\\,2i} = \\sin(\\omega_i\\, pos)$", ha="left", va="center",
            fontsize=fs(10))
    ax.plot([3.05, 3.4], [height - 0.62] * 2, color=ORANGE, lw=1.6, ls="--")
    ax.text(3.47, height - 0.62, "$\\mathrm{PE}_{pos,\\,2i+1} = \\cos(\\omega_i\\, pos)$", ha="left", va="center",
            fontsize=fs(10))
    for row, i in enumerate(pairs):
        y0 = bottom + (len(pairs) - 1 - row) * (panel_h + gap)
        pax = fig.add_axes((left / width, y0 / height, panel_w / width, panel_h / height))
        w = omega(i)
        pax.plot(fine, np.sin(w * fine), color=BLUE, lw=1.5)
        pax.plot(fine, np.cos(w * fine), color=ORANGE, lw=1.5, ls="--")
        pax.plot(positions, np.sin(w * positions), "o", color=BLUE, ms=3)
        pax.plot(positions, np.cos(w * positions), "s", color=ORANGE, ms=3)
        pax.set_xlim(-0.5, last + 0.5)
        pax.set_ylim(-1.2, 1.2)
        pax.set_yticks([-1, 0, 1])
        pax.set_xticks(range(0, last + 1, 5))
        pax.tick_params(labelsize=fs(9.3))
        if row < len(pairs) - 1:
            pax.set_xticklabels([])
        pax.text(1.01, 0.5, f"$i = {i}$\n$\\omega_{i} = {w:.3g}$\nwavelength\n{2 * math.pi / w:.1f}",
                 transform=pax.transAxes, ha="left", va="center", fontsize=fs(9.3))
    ax.text(left + panel_w / 2, 0.12, "position $pos$", ha="center", va="bottom", fontsize=fs(11))

    # Right: pair i = 1 as a point (PE_2i, PE_2i+1) on the unit circle; a shift by k turns it by k * omega.
    i, k = 1, 2
    w = omega(i)
    cx, cy, r = 8.75, 2.7, 1.5
    ax.text(cx, height - 0.2, f"Pair $i = {i}$ on the unit circle:\nshifting by $k = {k}$ turns it by"
            f" $k\\,\\omega_{i}$", ha="center", va="top", fontsize=fs(11), fontweight="bold")
    ax.add_patch(Circle((cx, cy), r, facecolor="none", edgecolor=GREY, linewidth=1.0))
    line(ax, [cx - r, cx + r], [cy, cy], colour=GREY, lw=0.8)
    line(ax, [cx, cx], [cy - r, cy + r], colour=GREY, lw=0.8)

    def point(pos, radius=r):
        return cx + radius * math.sin(w * pos), cy + radius * math.cos(w * pos)

    for pos in range(11):
        x, y = point(pos)
        ax.add_patch(Circle((x, y), 0.04, facecolor=GREY, edgecolor="none"))
        lx, ly = point(pos, r + 0.2)
        ax.text(lx, ly, str(pos), ha="center", va="center", fontsize=fs(9.3), color=GREY)
    for pos, colour in [(1, BLUE), (6, GREEN)]:
        for p in (pos, pos + k):
            arrow(ax, (cx, cy), point(p), colour=colour, lw=1.6)
        # the angle between them: standard angles (counter-clockwise from the x axis) of the two vectors
        a_start, a_end = 90 - math.degrees(w * (pos + k)), 90 - math.degrees(w * pos)
        ax.add_patch(Arc((cx, cy), 0.9 * r, 0.9 * r, theta1=a_start, theta2=a_end, color=colour, lw=1.6))
        mx, my = point(pos + k / 2, 0.45 * r + 0.22)
        ax.text(mx, my, f"$k\\,\\omega_{i}$", ha="center", va="center", fontsize=fs(10), color=colour)
    ax.text(cx, 0.12, "point $(\\mathrm{PE}_{pos,\\,2}, \\mathrm{PE}_{pos,\\,3})$ for $pos = 0, \\dots, 10$;\n"
            "$pos = 1 \\to 3$ (blue) and $6 \\to 8$ (green): the same angle,\nwhatever $pos$: "
            "$\\mathrm{PE}_{pos+k} = \\mathrm{PE}_{pos}\\, M_k$", ha="center", va="bottom", fontsize=fs(10))
    save(fig, "positional_waves.svg")


# --------------------------------------------------------------------------------------------------------------------
# f. Chapter 6: where LayerNorm goes, post-LN (the paper) and pre-LN.
# --------------------------------------------------------------------------------------------------------------------
def block_pre_post_ln() -> None:
    fig, ax = new_figure(10.0, 9.9, font_scale=1.1)
    bw, bh, sh, gap = 3.0, 0.52, 0.36, 0.28  # box width, sub-layer and small box heights, gap between
    ATT = ("multi-head self-attention", LIGHT_ORANGE, bh)
    FFN = ("feed-forward network (FFN)", LIGHT_GREEN, bh)
    LN = ("LayerNorm", LIGHT_PURPLE, sh)
    DROP = ("dropout", "white", sh)
    y_in, y_frame = 0.95, 1.55
    columns = [
        (2.55, "post-LN (Vaswani et al. 2017)", "$x \\leftarrow \\mathrm{LayerNorm}(x + f(x))$",
         ["branch", ATT, DROP, "add", LN, "branch", FFN, DROP, "add", LN], False),
        (7.45, "pre-LN (GPT-2, most models since)", "$x \\leftarrow x + f(\\mathrm{LayerNorm}(x))$",
         ["branch", LN, ATT, DROP, "add", "branch", LN, FFN, DROP, "add"], True),
    ]
    for cx, title, rule, items, pre in columns:
        ax.text(cx, 9.75, title, ha="center", va="top", fontsize=fs(13), fontweight="bold")
        ax.text(cx, 9.25, rule, ha="center", va="top", fontsize=fs(11))
        ax.text(cx, y_in - 0.2, f"input $(B, T, {DM})$", ha="center", va="top", fontsize=fs(11))
        y = y_frame + 0.3  # bottom of the next item
        prev_top = y_in - 0.12
        for item in items:
            if item == "branch":  # the residual leaves the main line here, just below the next box
                branch = y - gap / 2
                continue
            if item == "add":  # the residual: from the branch point, round the sub-layer, into the add
                prev_top = residual_add(ax, cx, y, prev_top, branch, xr=cx - bw / 2 - 0.35)
                y = prev_top + gap
                continue
            text, face, h = item
            arrow(ax, (cx, prev_top), (cx, y))
            box(ax, cx - bw / 2, y, bw, h, text, face=face, size=11, edge=GREY if text == "dropout" else "black",
                lw=1.0 if text == "dropout" else 1.2)
            prev_top, y = y + h, y + h + gap
        top = y - gap
        frame(ax, cx - bw / 2 - 0.6, y_frame, bw + 0.95, top - y_frame + 0.2, "$\\times N$")
        y = top + 0.2 + 0.45
        if pre:
            arrow(ax, (cx, prev_top), (cx, y))
            box(ax, cx - bw / 2, y, bw, sh, "final LayerNorm", face=LIGHT_PURPLE, size=11)
            prev_top, y = y + sh, y + sh + 0.45
        else:
            y += sh + 0.45
        arrow(ax, (cx, prev_top), (cx, y))
        ax.text(cx, y + 0.05, f"output $(B, T, {DM})$", ha="center", va="bottom", fontsize=fs(11))
    ax.plot([0.35, 0.75], [0.42, 0.42], color=BLUE, lw=1.6)
    ax.text(0.85, 0.42, "residual path; pre-LN's has no LayerNorm on it.  $f$ = a sub-layer.", ha="left",
            va="center", fontsize=fs(10))
    ax.text(0.35, 0.1, "Dropout acts in training only; tfm also puts it on the attention weights and inside the FFN.",
            ha="left", va="center", fontsize=fs(10), color="#555555")
    save(fig, "block_pre_post_ln.svg")


# --------------------------------------------------------------------------------------------------------------------
# g. Chapter 7: the encoder-decoder, with the memory feeding every decoder layer's cross-attention.
# --------------------------------------------------------------------------------------------------------------------
def encoder_decoder() -> None:
    fig, ax = new_figure(10.4, 9.5, font_scale=1.1)
    bw, bh, nh, gap = 2.9, 0.5, 0.34, 0.22
    enc_x, dec_x = 2.6, 7.55

    def stack(cx, y, items, side):
        """Sub-layers bottom-up, each followed by add & LayerNorm with a residual on `side` (-1 left, +1 right)."""
        centres = {}
        for text, face in items:
            branch = y - gap / 2
            box(ax, cx - bw / 2, y, bw, bh, text, face=face, size=11)
            centres[text] = y + bh / 2
            arrow(ax, (cx, y + bh), (cx, y + bh + gap))
            y += bh + gap
            box(ax, cx - bw / 2, y, bw, nh, "add & LayerNorm", face=LIGHT_PURPLE, size=10)
            xr = cx + side * (bw / 2 + 0.25)
            line(ax, [cx, xr, xr], [branch, branch, y + nh / 2], colour=BLUE, lw=1.5)
            arrow(ax, (xr, y + nh / 2), (cx + side * bw / 2, y + nh / 2), colour=BLUE, lw=1.5)
            ax.add_patch(Circle((cx, branch), 0.04, facecolor=BLUE, edgecolor="none"))
            y += nh
            arrow(ax, (cx, y), (cx, y + gap))
            y += gap
        return y - gap, centres

    def bottom(cx, tokens, shape, side):
        ax.text(cx, 0.15, tokens, ha="center", va="bottom", fontsize=fs(11))
        arrow(ax, (cx, 0.5), (cx, 0.75))
        box(ax, cx - bw / 2, 0.75, bw, bh, f"embedding $\\times \\sqrt{{{DM}}}$", face=LIGHT_GREY, size=11)
        arrow(ax, (cx, 0.75 + bh), (cx, 1.6))
        add_node(ax, cx, 1.76)
        x_pe = cx + side * (bw / 2 + 0.1)
        arrow(ax, (x_pe, 1.76), (cx + side * 0.16, 1.76))
        ax.text(x_pe + side * 0.05, 1.76, "positional\nencoding", ha="left" if side > 0 else "right", va="center",
                fontsize=fs(10))
        arrow(ax, (cx, 1.92), (cx, 2.55))
        ax.text(cx + 0.1, 2.2, shape, ha="left", va="center", fontsize=fs(10))
        return 2.55

    # Encoder: left. Its residuals run on the left, the decoder's on the right, so the memory crosses neither.
    y0 = bottom(enc_x, "source tokens $(B, S)$", f"$(B, S, {DM})$", -1)
    enc_items = [("self-attention", LIGHT_ORANGE), ("feed-forward (FFN)", LIGHT_GREEN)]
    enc_top, _ = stack(enc_x, y0 + 0.15, enc_items, -1)
    frame(ax, enc_x - bw / 2 - 0.5, y0 + 0.02, bw + 0.75, enc_top - y0 + 0.1, "")
    ax.text(enc_x - bw / 2 - 0.6, (y0 + enc_top) / 2, "$N\\times$", ha="right", va="center", fontsize=fs(12),
            fontweight="bold")
    ax.text(enc_x, 9.4, "Encoder", ha="center", va="top", fontsize=fs(14), fontweight="bold")

    # Decoder: right.
    y0 = bottom(dec_x, "target tokens (shifted) $(B, T)$", f"$(B, T, {DM})$", 1)
    dec_items = [("masked self-attention", LIGHT_ORANGE), ("cross-attention", LIGHT_BLUE),
                 ("feed-forward (FFN)", LIGHT_GREEN)]
    dec_top, centres = stack(dec_x, y0 + 0.15, dec_items, 1)
    frame(ax, dec_x - bw / 2 - 0.25, y0 + 0.02, bw + 0.75, dec_top - y0 + 0.1, "$\\times N$")
    ax.text(dec_x, 9.4, "Decoder", ha="center", va="top", fontsize=fs(14), fontweight="bold")

    # Memory: the encoder's output, into the keys and values of every decoder layer's cross-attention.
    y_mem = enc_top + 0.75
    arrow(ax, (enc_x, enc_top + 0.12), (enc_x, y_mem - 0.02), style="-")
    ax.text(enc_x, y_mem + 0.1, f"memory $(B, S, {DM})$", ha="center", va="bottom", fontsize=fs(11),
            fontweight="bold")
    x_turn = dec_x - bw / 2 - 0.95
    y_cross = centres["cross-attention"]
    line(ax, [enc_x, x_turn, x_turn], [y_mem, y_mem, y_cross], lw=1.6)
    arrow(ax, (x_turn, y_cross), (dec_x - bw / 2, y_cross), lw=1.6)
    ax.text(x_turn + 0.35, y_cross + 0.08, "$K, V$", ha="center", va="bottom", fontsize=fs(11))
    ax.text((enc_x + x_turn) / 2 + 0.2, y_mem - 0.12, "to every decoder layer", ha="center", va="top",
            fontsize=fs(10), color=GREY)
    ax.text(dec_x - 0.1, y_cross - bh / 2 - 0.11, "$Q$", ha="right", va="center", fontsize=fs(11))

    # Generator on top of the decoder.
    y = dec_top + 0.12
    arrow(ax, (dec_x, y), (dec_x, y + 0.5))
    ax.text(dec_x + 0.1, y + 0.25, f"$(B, T, {DM})$", ha="left", va="center", fontsize=fs(10))
    y += 0.5
    box(ax, dec_x - bw / 2, y, bw, bh, f"generator: linear ${DM} \\to {NV}$", face=LIGHT_GREY, size=11)
    y += bh
    arrow(ax, (dec_x, y), (dec_x, y + 0.5))
    ax.text(dec_x + 0.1, y + 0.25, f"logits $(B, T, {NV})$", ha="left", va="center", fontsize=fs(10))
    y += 0.5
    box(ax, dec_x - bw / 2, y, bw, bh, f"softmax over ${NV}$", face="white", size=11)
    y += bh
    arrow(ax, (dec_x, y), (dec_x, y + 0.35))
    ax.text(dec_x, y + 0.4, f"next-token probabilities $(B, T, {NV})$", ha="center", va="bottom", fontsize=fs(11))
    ax.text(enc_x - bw / 2 - 0.6, 8.6, "Each sub-layer: residual (blue)\nadded, then LayerNorm (post-LN).\n"
            "The loss applies the softmax\nitself: the model returns logits.", ha="left", va="top", fontsize=fs(10),
            color="#555555")
    save(fig, "encoder_decoder.svg")


# --------------------------------------------------------------------------------------------------------------------
# h. Chapter 9: one decoding step with a key/value cache.
# --------------------------------------------------------------------------------------------------------------------
def kv_cache() -> None:
    t, dk, c = 5, 4, 0.32
    fig, ax = new_figure(11.0, 7.6, font_scale=1.15)
    ax.text(0.2, 7.45, f"Decoding step $t$ (here $t = {t}$): one head, one batch element", ha="left", va="top",
            fontsize=fs(12), fontweight="bold")
    top = 5.7  # top edge of the K and V grids
    rows = [LIGHT_GREY] * (t - 1) + [ORANGE]
    y_new = top - (t - 0.5) * c  # centre of row t

    # The new token and its three projections.
    box(ax, 0.2, y_new - 0.3, 1.25, 0.6, "new token\n$x_t$", face=LIGHT_ORANGE, size=11)
    xk = 2.5
    grid(ax, xk, top, t, dk, c, colours=[[r] * dk for r in rows])
    arrow(ax, (1.45, y_new), (xk - 0.05, y_new))
    ax.text((1.45 + xk) / 2, y_new - 0.08, "$W_K$", ha="center", va="top", fontsize=fs(11))
    for j in range(t - 1):
        ax.text(xk - 0.1, top - (j + 0.5) * c, f"$k_{j + 1}$", ha="right", va="center", fontsize=fs(10))
    ax.text(xk + dk * c / 2, top + 0.1, "keys $K$", ha="center", va="bottom", fontsize=fs(11))
    # q_t: one row above K, from x_t through W_Q
    y_q = top + 0.95
    grid(ax, xk, y_q, 1, dk, c, colours=[[ORANGE] * dk])
    line(ax, [0.82, 0.82], [y_new + 0.3, y_q - c / 2])
    arrow(ax, (0.82, y_q - c / 2), (xk - 0.05, y_q - c / 2))
    ax.text(1.8, y_q - c / 2 + 0.08, "$W_Q$", ha="center", va="bottom", fontsize=fs(11))
    ax.text(xk + dk * c / 2, y_q + 0.08, "query $q_t$ (one row)", ha="center", va="bottom", fontsize=fs(11))

    # Scores and weights, one per cached row; the values.
    weights = [0.06, 0.10, 0.30, 0.14, 0.40]
    xs, xw, xv = 4.3, 5.8, 7.3
    for j in range(t):
        y = top - (j + 1) * c
        box(ax, xs, y, 0.95, c, f"$q_t \\cdot k_{j + 1}$", face="white", size=9.3, lw=0.8)
        ax.add_patch(Rectangle((xw, y), 0.95, c, facecolor="white", edgecolor="black", linewidth=0.8))
        ax.add_patch(Rectangle((xw, y), 0.95 * weights[j] / max(weights), c, facecolor=LIGHT_GREEN,
                               edgecolor="none"))
        ax.text(xw + 0.475, y + c / 2, f"{weights[j]:.2f}", ha="center", va="center", fontsize=fs(9.3))
    arrow(ax, (xk + dk * c + 0.05, top - 2.5 * c), (xs - 0.05, top - 2.5 * c))
    line(ax, [xk + dk * c, xs + 0.475], [y_q - c / 2] * 2)  # q_t meets every key in the scores
    arrow(ax, (xs + 0.475, y_q - c / 2), (xs + 0.475, top + 0.6))
    ax.text(xs + 0.475, top + 0.1, "scores\n$q_t \\cdot k_j / \\sqrt{d_k}$", ha="center", va="bottom", fontsize=fs(10))
    arrow(ax, (xs + 1.0, top - 2.5 * c), (xw - 0.05, top - 2.5 * c))
    ax.text(xw + 0.475, top + 0.1, "weights $a_j$\n(softmax)", ha="center", va="bottom", fontsize=fs(10))
    grid(ax, xv, top, t, dk, c, colours=[[r if r == ORANGE else LIGHT_GREY for _ in range(dk)] for r in rows])
    ax.text(xv + dk * c / 2, top + 0.1, "values $V$", ha="center", va="bottom", fontsize=fs(11))
    arrow(ax, (xw + 1.0, top - 2.5 * c), (xv - 0.05, top - 2.5 * c))
    arrow(ax, (xv + dk * c + 0.05, top - 2.5 * c), (xv + dk * c + 0.5, top - 2.5 * c))
    xz = xv + dk * c + 0.55
    grid(ax, xz, top - 2 * c, 1, dk, c, colours=[[LIGHT_GREEN] * dk])
    ax.text(xz + dk * c / 2, top - 3 * c - 0.08, "output\n$z_t = \\sum_j a_j v_j$", ha="center", va="top",
            fontsize=fs(11))
    # v_t: from x_t along the bottom into the last row of V
    y_low = top - t * c - 0.35
    line(ax, [0.82, 0.82, xv + dk * c / 2], [y_new - 0.3, y_low, y_low])
    arrow(ax, (xv + dk * c / 2, y_low), (xv + dk * c / 2, top - t * c - 0.02))
    ax.text(xv - 0.8, y_low - 0.06, "$W_V$", ha="center", va="top", fontsize=fs(11))

    # Colour key.
    ax.add_patch(Rectangle((0.2, 2.77), 0.26, 0.26, facecolor=LIGHT_GREY, edgecolor="black", linewidth=0.8))
    ax.text(0.6, 2.9, "rows $1, \\dots, t-1$ of $K$ and $V$: read from the cache", ha="left", va="center",
            fontsize=fs(11))
    ax.add_patch(Rectangle((5.9, 2.77), 0.26, 0.26, facecolor=ORANGE, edgecolor="black", linewidth=0.8))
    ax.text(6.3, 2.9, "row $t$: computed now from $x_t$", ha="left", va="center", fontsize=fs(11))
    ax.text(0.2, 2.4, "Each layer's cache holds $K$ and $V$ of shape $(B, h, t, d_k)$; every step appends one row"
            " along $t$.", ha="left", va="center", fontsize=fs(11))

    # Work per step, with and without the cache.
    cs = 0.15
    x0 = 2.6
    for label, cached, y_top in [("without a cache:", False, 1.95), ("with a cache:", True, 1.07)]:
        ax.text(0.2, y_top - 0.4, label, ha="left", va="center", fontsize=fs(11), fontweight="bold")
        for step in range(1, t + 1):
            x = x0 + (step - 1) * 0.72
            colours = [[LIGHT_GREY if cached and j < step - 1 else ORANGE] * dk for j in range(step)]
            grid(ax, x, y_top - (t - step) * cs, step, dk, cs, colours=colours)
        done = [1] * t if cached else list(range(1, t + 1))
        ax.text(x0 + t * 0.72 + 0.15, y_top - 0.4, f"rows of $K$ and $V$ computed: {' + '.join(map(str, done))}"
                f" = {sum(done)}", ha="left", va="center", fontsize=fs(11))
    for step in range(1, t + 1):
        ax.text(x0 + (step - 1) * 0.72 + dk * cs / 2, 0.05, f"step {step}", ha="center", va="bottom",
                fontsize=fs(9.3))
    save(fig, "kv_cache.svg")


# --------------------------------------------------------------------------------------------------------------------
# i. Chapter 10: a digit cut into 2 x 2 patches, the patch sequence, and the ViT's input to the encoder.
# --------------------------------------------------------------------------------------------------------------------
def vit_patches() -> None:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    train_idx, _ = train_test_split(range(len(digits.target)), test_size=0.25, random_state=0,
                                    stratify=digits.target)
    image = digits.images[train_idx[0]] / 16.0  # x_train[0] of chapter 10 (a 7)
    p, n_grid = 2, 4
    patches = [image[r * p:(r + 1) * p, col * p:(col + 1) * p].reshape(-1) for r in range(n_grid)
               for col in range(n_grid)]

    def grey(v):
        return to_hex((1 - v, 1 - v, 1 - v))

    fig, ax = new_figure(12.3, 5.3, font_scale=1.4)
    top = 4.2
    # the image
    c = 0.36
    grid(ax, 0.3, top, 8, 8, c, colours=[[grey(v) for v in r] for r in image])
    for k in range(n_grid + 1):
        line(ax, [0.3 + k * p * c] * 2, [top, top - 8 * c], colour=ORANGE, lw=2)
        line(ax, [0.3, 0.3 + 8 * c], [top - k * p * c] * 2, colour=ORANGE, lw=2)
    for n in range(n_grid * n_grid):
        ax.text(0.3 + (n % n_grid) * p * c + 0.05, top - (n // n_grid) * p * c - 0.05, str(n), ha="left",
                va="top", fontsize=fs(8.5), color=ORANGE, fontweight="bold",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
    # one patch and its row, outlined, to follow the flattening
    hl = 1
    outline = {"facecolor": "none", "edgecolor": BLUE, "lw": 3, "zorder": 3}
    ax.add_patch(Rectangle((0.3 + hl * p * c, top - p * c), p * c, p * c, **outline))
    ax.text(0.3 + 4 * c, top + 0.12, "8 × 8 image, $2 \\times 2$ patches", ha="center", va="bottom", fontsize=fs(10))
    ax.text(0.3 + 4 * c, top - 8 * c - 0.1, "$(B, C, H, W)$\n$= (B, 1, 8, 8)$", ha="center", va="top",
            fontsize=fs(10))

    # the sequence of flattened patches
    cs = 0.22
    xs = 4.5
    seq_top = top + 0.1
    arrow(ax, (0.4 + 8 * c, top - 4 * c), (xs - 0.35, top - 4 * c))
    ax.text((0.3 + 8 * c + xs - 0.3) / 2, top - 4 * c + 0.1, "flatten\neach patch", ha="center", va="bottom",
            fontsize=fs(9))
    grid(ax, xs, seq_top, 16, 4, cs, colours=[[grey(v) for v in r] for r in patches])
    for n in range(16):
        ax.text(xs - 0.06, seq_top - (n + 0.5) * cs, str(n), ha="right", va="center", fontsize=fs(8.5), color=ORANGE)
    ax.add_patch(Rectangle((xs, seq_top - (hl + 1) * cs), 4 * cs, cs, **outline))
    ax.text(xs + 2 * cs, seq_top + 0.1, "$N = 16$ tokens,\n$C p^2 = 4$ values", ha="center", va="bottom",
            fontsize=fs(9))
    ax.text(xs + 2 * cs, seq_top - 16 * cs - 0.1, "$(B, 16, 4)$", ha="center", va="top", fontsize=fs(10))

    # projection, class token, positions
    xt, tw = 6.75, 1.1
    arrow(ax, (xs + 4 * cs + 0.08, seq_top - 8 * cs), (xt - 0.08, seq_top - 8 * cs))
    ax.text((xs + 4 * cs + xt) / 2, seq_top - 8 * cs + 0.1, "linear $E$\n$4 \\to d_{\\mathrm{model}}$",
            ha="center", va="bottom", fontsize=fs(9))
    ax.text((xs + 4 * cs + xt) / 2, seq_top - 8 * cs - 0.1, "(shared)", ha="center", va="top", fontsize=fs(9))
    tok_top = seq_top + cs  # one row more than the patches: the class token on top
    for n in range(17):
        face = LIGHT_ORANGE if n == 0 else LIGHT_BLUE
        ax.add_patch(Rectangle((xt, tok_top - (n + 1) * cs), tw, cs, facecolor=face, edgecolor="black",
                               linewidth=0.8))
    ax.text(xt + tw / 2, tok_top - 0.5 * cs, "$x_{\\mathrm{cls}}$", ha="center", va="center", fontsize=fs(8.5))
    ax.text(xt + tw / 2, tok_top + 0.1, "class token\n(learned)", ha="center", va="bottom", fontsize=fs(9))
    ax.text(xt + tw + 0.2, tok_top - 8.5 * cs, "+", ha="center", va="center", fontsize=fs(14))
    xp = xt + tw + 0.4
    grid(ax, xp, tok_top, 17, 1, cs, face=LIGHT_GREEN)
    ax.text(xp + cs / 2, tok_top + 0.1, "$E_{\\mathrm{pos}}$\n(learned)", ha="center", va="bottom", fontsize=fs(9))
    ax.text(xt + (tw + 0.4 + cs) / 2, tok_top - 17 * cs - 0.1, "$(B, 17, d_{\\mathrm{model}})$", ha="center",
            va="top", fontsize=fs(10))

    # encoder and head
    xe, ew = 8.85, 1.4
    arrow(ax, (xp + cs + 0.08, tok_top - 8.5 * cs), (xe - 0.08, tok_top - 8.5 * cs))
    box(ax, xe, tok_top - 17 * cs, ew, 17 * cs, "encoder\n(pre-LN,\nchapter 6)", face=LIGHT_GREY, size=10)
    y_cls = tok_top - 0.5 * cs
    xh = xe + ew + 0.65
    arrow(ax, (xe + ew + 0.05, y_cls), (xh - 0.05, y_cls), colour=ORANGE, lw=1.6)
    ax.text((xe + ew + xh) / 2, y_cls + 0.1, "class\ntoken", ha="center", va="bottom", fontsize=fs(9))
    box(ax, xh, y_cls - 0.3, 1.2, 0.6, "linear\nhead", face=LIGHT_ORANGE, size=10)
    ax.text(xh + 0.6, y_cls - 0.4, "$(B, d_{\\mathrm{model}})$\n$\\to (B, 10)$:\nlogits of the\ndigits 0\u20139",
            ha="center", va="top", fontsize=fs(9))
    ax.text(0.3, 0.22, "Each of the 16 patches becomes one token, read row by row like text; "
            "the encoder sees 17 vectors.", ha="left", va="center", fontsize=fs(10))
    save(fig, "vit_patches.svg")


FIGURES = [positional_waves, block_pre_post_ln, encoder_decoder, kv_cache, vit_patches]
