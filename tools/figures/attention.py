"""Schematics of chapters 1-4 (attention, its matrix form, heads, masks), all computed from the book's worked example
("dogs chase the red ball", `story`). Drawn with the helpers of style.py; `python -m tools.figures` draws every figure.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.patches import Rectangle

from tools.figures.style import (
    BLUE,
    GREEN,
    GREY,
    HEAD_COLOURS,
    LIGHT_BLUE,
    LIGHT_GREEN,
    LIGHT_GREY,
    LIGHT_ORANGE,
    ORANGE,
    arrow,
    box,
    fs,
    grid,
    halo_line,
    new_figure,
    num,
    save,
    vec,
)


def story():
    """The book's worked example (guide: "dogs chase the red ball"): tokens, X (T x d_model) and the projections of
    chapter 1 (d_model x d_k), as numpy arrays. Chapters 1-4 compute with these; the figures recompute from them."""
    tokens = ["dogs", "chase", "the", "red", "ball"]
    X = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0.5, 0, 0, 0.5], [1, 0, 0, 0]], dtype=float)
    W_Q = np.array([[-1, -0.5], [0, 1], [1, 1], [2, -1]], dtype=float)
    W_K = np.array([[1, 0], [0, 1], [-1, 1], [-1, -1]], dtype=float)
    W_V = np.array([[1, 0], [0, 1], [0, 1], [0, 0]], dtype=float)
    return tokens, X, W_Q, W_K, W_V


def softmax_rows(scores, allowed=None):
    """Row-wise softmax; entries where `allowed` is False get weight exactly 0 (the -inf of a mask)."""
    scores = np.asarray(scores, dtype=float)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------------------------------------------------
# a. Chapter 1: one query token's path through attention (indices t = 0..4 as in chapter 1).
# --------------------------------------------------------------------------------------------------------------------
def qkv_flow() -> None:
    # Chapter 1's worked example: every number drawn is computed here from X and the matrices, as chapter 1 does.
    # Portrait, one column per token, so that the figure keeps readable text on a phone (about 360 px wide): the
    # steps run from top to bottom, the query of "chase" runs across every column.
    tokens, X, W_Q, W_K, W_V = story()
    query_index = tokens.index("chase")
    q = X[query_index] @ W_Q  # (d_k,) = (1, 1)
    keys, values = X @ W_K, X @ W_V  # (T, d_k) each
    dots = keys @ q  # (T,): 2, 0, -2, -0.5, 1
    scores = dots / math.sqrt(W_Q.shape[1])
    weights = softmax_rows(scores[None])[0]  # 0.51, 0.12, 0.03, 0.09, 0.25, as printed in chapter 1
    weighted = weights[:, None] * values  # (T, d_v)
    output = weighted.sum(axis=0)  # (0.80, 0.63)

    pitch, margin = 1.44, 0.3  # column pitch; the query's route runs in the left margin
    width, height = margin + pitch * len(tokens) + 0.05, 9.1
    fig, ax = new_figure(width, height, font_scale=1.4)
    centres = [margin + pitch * (t + 0.5) for t in range(len(tokens))]
    bw = pitch - 0.08  # width of a full box
    left = -0.27  # the key's track (score, weight) runs left of a column's centre...
    lane = 0.5  # ...and the value's green lane right of it
    tw = 0.9  # width of a box on the key's track
    y_q = height - 0.45  # the query box
    y_tok, h_tok = height - 1.65, 0.95  # token boxes (centre, height)
    y_kv, h_kv = height - 3.05, 0.72  # key and value boxes
    y_bus = height - 3.85  # the query's bus line
    y_s, h_s = height - 4.65, 0.62  # score boxes
    y_w = height - 5.85  # weight bars
    y_p, h_p = height - 7.0, 0.5  # the products a_t v_t
    y_z = 0.5  # the output z

    for t, (tok, cx) in enumerate(zip(tokens, centres, strict=True)):
        is_query = t == query_index
        vector = vec(X[t])
        if len(vector) > 13:  # "(0.5, 0, 0, 0.5)": on two lines, after its second comma
            cut = vector.index(",", vector.index(",") + 1) + 1
            vector = vector[:cut] + "\n" + vector[cut + 1:]
        box(ax, cx - bw / 2, y_tok - h_tok / 2, bw, h_tok, f"\u201c{tok}\u201d\n{vector}", size=10,
            face=LIGHT_ORANGE if is_query else LIGHT_GREY, linespacing=1.35)
        # x_t -> its key and its value, in one box of two halves
        arrow(ax, (cx, y_tok - h_tok / 2), (cx, y_kv + h_kv / 2))
        if t == 0:  # the same two projections in every column: labelled once
            ax.text(cx + 0.06, (y_tok - h_tok / 2 + y_kv + h_kv / 2) / 2, "$\\cdot W_K$\n$\\cdot W_V$", ha="left",
                    va="center", fontsize=fs(9.5), linespacing=1.2)
        box(ax, cx - bw / 2, y_kv, bw, h_kv / 2, f"$k$ = {vec(keys[t])}", face=LIGHT_BLUE, size=10)
        box(ax, cx - bw / 2, y_kv - h_kv / 2, bw, h_kv / 2, f"$v$ = {vec(values[t])}", face=LIGHT_GREEN,
            size=10)
        # key -> score (the key's track); the value rides its green lane down to the product
        x_track = cx + left
        arrow(ax, (x_track, y_kv - h_kv / 2), (x_track, y_s + h_s / 2), colour=BLUE)
        ax.plot([cx + lane, cx + lane], [y_kv - h_kv / 2, y_p + h_p / 2 + 0.1], color=GREEN, lw=1.4, zorder=1)
        arrow(ax, (cx + lane, y_p + h_p / 2 + 0.3), (cx + lane, y_p + h_p / 2), colour=GREEN, lw=1.4)
        box(ax, x_track - tw / 2, y_s - h_s / 2, tw, h_s, f"{num(dots[t], 'g')}/$\\sqrt{{2}}$\n= {num(scores[t])}",
            size=10, linespacing=1.3)
        # score -> weight bar (length proportional to a_t, the number above it) -> product
        arrow(ax, (x_track, y_s - h_s / 2), (x_track, y_w + 0.42))
        ax.text(x_track, y_w + 0.3, num(weights[t]), ha="center", va="center", fontsize=fs(10.5))
        ax.add_patch(Rectangle((x_track - tw / 2, y_w - 0.12), tw, 0.24, facecolor="white", edgecolor=GREY,
                               linewidth=0.8))
        ax.add_patch(Rectangle((x_track - tw / 2, y_w - 0.12), tw * weights[t] / weights.max(), 0.24,
                               facecolor=ORANGE, edgecolor="none"))
        arrow(ax, (x_track, y_w - 0.12), (x_track, y_p + h_p / 2))
        box(ax, cx - bw / 2, y_p - h_p / 2, bw, h_p, vec(weighted[t], ".2f"), face=LIGHT_GREEN, size=10)

    # Row labels in the gaps, at the left of the first column's track.
    for y, text in [((y_kv - h_kv / 2 + y_bus) / 2 - 0.02, ""),
                    ((y_s - h_s / 2 + y_w + 0.42) / 2, "softmax over $t$"),
                    ((y_w - 0.12 + y_p + h_p / 2) / 2, "$a_t\\,v_t$")]:
        if text:
            ax.text(centres[0] + left + 0.08, y, text, ha="left", va="center", fontsize=fs(9.5), color=GREY,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0}, zorder=4)

    # The query: x_chase W_Q, from the token box of "chase" up into the query box, then round the left margin and
    # along the bus line into every score box (over a white halo where it crosses a key's arrow or a value's lane).
    cq = centres[query_index]
    q_w = 3.3
    q_left = cq - 0.9
    arrow(ax, (cq, y_tok + h_tok / 2), (cq, y_q - 0.25), colour=ORANGE, lw=1.6)
    ax.text(cq + 0.08, (y_tok + h_tok / 2 + y_q - 0.25) / 2, "$\\cdot W_Q$", ha="left", va="center",
            fontsize=fs(10), color=ORANGE)
    box(ax, q_left, y_q - 0.25, q_w, 0.5, f"query $q = x_{{\\mathrm{{chase}}}} W_Q$ = {vec(q)}", face=LIGHT_ORANGE,
        edge=ORANGE, size=10.5)
    note = "every token has a query\n$x_t W_Q$; this figure\nfollows that of \u201cchase\u201d"
    ax.text(q_left + q_w + 0.12, y_q - 0.1, note, ha="left", va="center", fontsize=fs(9), color=GREY,
            linespacing=1.25)
    x_margin = margin / 2
    halo_line(ax, [q_left, x_margin, x_margin, centres[-1] + left - tw / 2 + 0.12],
              [y_q, y_q, y_bus, y_bus], ORANGE)
    for cx in centres:
        x_drop = cx + left - tw / 2 + 0.12
        halo_line(ax, [x_drop, x_drop], [y_bus, y_s + h_s / 2 + 0.15], ORANGE)
        arrow(ax, (x_drop, y_s + h_s / 2 + 0.3), (x_drop, y_s + h_s / 2), colour=ORANGE, lw=1.6)
    ax.text(centres[0] + left - tw / 2 + 0.25, y_bus + 0.06, "$q \\cdot k_t / \\sqrt{d_k}$", ha="left", va="bottom",
            fontsize=fs(9.5), color=ORANGE, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0}, zorder=4)

    # The output: the sum of the products.
    y_top = y_p - h_p / 2 - 0.12
    x_first, x_last = centres[0] - bw / 2, centres[-1] + bw / 2
    ax.plot([x_first, x_first, x_last, x_last], [y_top + 0.08, y_top - 0.02, y_top - 0.02, y_top + 0.08],
            color="black", lw=1.2)
    x_mid = (x_first + x_last) / 2
    arrow(ax, (x_mid, y_top - 0.02), (x_mid, y_z + 0.4))
    ax.text(x_mid + 0.1, (y_top + y_z + 0.4) / 2, "sum over $t$", ha="left", va="center", fontsize=fs(9.5),
            color=GREY)
    box(ax, x_mid - 1.3, y_z - 0.4, 2.6, 0.8, f"$z$ = {vec(output, '.2f')}", face=LIGHT_GREEN, size=11,
        fontweight="bold")
    ax.text(0.1, y_z + 0.05, "the weights $a_t \\geq 0$\nsum to 1: $z$ is a\nweighted average\nof the values $v_t$",
            ha="left", va="center", fontsize=fs(9), color=GREY, linespacing=1.25)
    save(fig, "qkv_flow.svg")


# --------------------------------------------------------------------------------------------------------------------
# b. Chapter 2: the same computation as matrix products.
# --------------------------------------------------------------------------------------------------------------------
def scores_matrix() -> None:
    # Chapter 2's matrix form of the worked example: Q = X W_Q, K = X W_K, V = X W_V, all five tokens at once.
    # Every number drawn is computed here (numpy) from the example's X and matrices.
    tokens, X, W_Q, W_K, W_V = story()
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d_k), (S, d_k), (S, d_v)
    d_k = Q.shape[1]
    scores = Q @ K.T / math.sqrt(d_k)  # (T, S)
    A = softmax_rows(scores)  # (T, S), rows sum to 1
    Z = A @ V  # (T, d_v)
    T, S = scores.shape
    row, col = tokens.index("chase"), tokens.index("dogs")  # the highlighted query and key

    c = 0.56  # cell size
    width, height = 11.85, 9.95
    fig, ax = new_figure(width, height, font_scale=1.3)
    x_Q = 1.0
    x_S = x_Q + d_k * c + 0.9
    x_A = x_S + S * c + 1.3
    x_Z = x_A + S * c + 0.55
    y_low = 5.4  # top edge of Q, the scores, A and Z
    y_up = y_low + 1.05 + S * c  # top edge of K and V
    y_KT = y_low + 1.05 + d_k * c  # top edge of K^T (its bottom level with K's)
    PURPLE_TINT = "#cbc9e2"

    def row_labels(x, top, colour=GREY, size=10):
        for i, tok in enumerate(tokens):
            ax.text(x - 0.08, top - (i + 0.5) * c, tok, ha="right", va="center", fontsize=fs(size), color=colour)

    def col_labels(x, top, size=9.5):
        for j, tok in enumerate(tokens):
            ax.text(x + (j + 0.5) * c, top + 0.06, tok, ha="center", va="bottom", fontsize=fs(size), color=GREY,
                    rotation=0)

    def cells(M, fmt):
        return [[num(v, fmt) for v in r] for r in M]

    def under(x, w, top, rows, text):
        ax.text(x + w / 2, top - rows * c - 0.1, text, ha="center", va="top", fontsize=fs(10.5), linespacing=1.3)

    # K and its transpose: row j of K becomes column j of K^T.
    colours = [[LIGHT_BLUE if i == col else LIGHT_GREY for _ in range(d_k)] for i in range(S)]
    grid(ax, x_Q, y_up, S, d_k, c, values=cells(K, "g"), colours=colours, size=8.7)
    row_labels(x_Q, y_up)
    ax.text(x_Q + d_k * c / 2, y_up + 0.1, "$K$  (5 \u00d7 2)\nrow $j$ = key $k_j$", ha="center", va="bottom",
            fontsize=fs(10.5), linespacing=1.3)
    colours = [[LIGHT_BLUE if j == col else LIGHT_GREY for j in range(S)] for _ in range(d_k)]
    grid(ax, x_S, y_KT, d_k, S, c, values=cells(K.T, "g"), colours=colours, size=8.7)
    col_labels(x_S, y_KT)
    ax.text(x_S + S * c / 2, y_KT + 0.42, "$K^\\top$  (2 \u00d7 5): column $j$ = key $k_j$", ha="center",
            va="bottom", fontsize=fs(10.5))
    arrow(ax, (x_Q + d_k * c + 0.08, y_KT - c), (x_S - 0.08, y_KT - c))
    ax.text((x_Q + d_k * c + x_S) / 2, y_KT - c + 0.08, "transpose", ha="center", va="bottom", fontsize=fs(9))

    # Q times K^T: row i of Q meets column j of K^T in cell (i, j) of the scores (drawn in Falk's scheme).
    colours = [[LIGHT_ORANGE if i == row else LIGHT_GREY for _ in range(d_k)] for i in range(T)]
    grid(ax, x_Q, y_low, T, d_k, c, values=cells(Q, "g"), colours=colours, size=8.7)
    row_labels(x_Q, y_low, colour="black")
    ax.text(x_Q - 0.08, y_low + 0.1, "queries", ha="right", va="bottom", fontsize=fs(10), color=GREY)
    under(x_Q, d_k * c, y_low, T, "$Q$\n(5 \u00d7 2)")
    colours = [[LIGHT_GREY] * S for _ in range(T)]
    for j in range(S):
        colours[row][j] = LIGHT_ORANGE
    for i in range(T):
        colours[i][col] = LIGHT_BLUE
    colours[row][col] = PURPLE_TINT
    grid(ax, x_S, y_low, T, S, c, values=cells(scores, ".2f"), colours=colours, size=8.7)
    ax.add_patch(Rectangle((x_S + col * c, y_low - (row + 1) * c), c, c, facecolor="none", edgecolor="black",
                           linewidth=2.4))
    # Dashed guides: the row of Q and the column of K^T run on into the cell where they meet.
    y_row = y_low - (row + 0.5) * c
    ax.plot([x_Q + d_k * c + 0.05, x_S - 0.05], [y_row, y_row], color=ORANGE, lw=1.6, ls=(0, (4, 3)))
    x_col = x_S + (col + 0.5) * c
    ax.plot([x_col, x_col], [y_KT - d_k * c - 0.05, y_low + 0.05], color=BLUE, lw=1.6, ls=(0, (4, 3)))
    under(x_S, S * c, y_low, T, "scores $Q K^\\top / \\sqrt{d_k}$\n(5 \u00d7 5)")

    # Softmax row by row, then A V = Z (again in Falk's scheme: V above Z).
    y_mid = y_low - T * c / 2
    arrow(ax, (x_S + S * c + 0.1, y_mid), (x_A - 0.1, y_mid))
    ax.text((x_S + S * c + x_A) / 2, y_mid + 0.1, "softmax\nrow by row", ha="center", va="bottom",
            fontsize=fs(10), linespacing=1.2)
    colours = [[LIGHT_ORANGE if i == row else LIGHT_GREY for _ in range(S)] for i in range(T)]
    grid(ax, x_A, y_low, T, S, c, values=cells(A, ".2f"), colours=colours, size=8.7)
    col_labels(x_A, y_low)
    under(x_A, S * c, y_low, T, "weights $A$ (5 \u00d7 5)\nevery row sums to 1")
    grid(ax, x_Z, y_up, S, d_k, c, values=cells(V, "g"), face=LIGHT_GREEN, size=8.7)
    row_labels(x_Z, y_up)
    ax.text(x_Z + d_k * c / 2, y_up + 0.1, "$V$  (5 \u00d7 2)\nrow $j$ = value $v_j$", ha="center", va="bottom",
            fontsize=fs(10.5), linespacing=1.3)
    colours = [[LIGHT_ORANGE if i == row else LIGHT_GREY for _ in range(d_k)] for i in range(T)]
    grid(ax, x_Z, y_low, T, d_k, c, values=cells(Z, ".2f"), colours=colours, size=8.7)
    ax.plot([x_A + S * c + 0.05, x_Z - 0.05], [y_row, y_row], color=ORANGE, lw=1.6, ls=(0, (4, 3)))
    under(x_Z, d_k * c, y_low, T, "$Z = AV$\n(5 \u00d7 2)")

    ax.text(x_S + S * c + 0.35, y_up - 0.1,
            "How to read a product $LR$ here:\nthe left factor $L$ stands to the left\nof the result, the right factor"
            " $R$\nabove it; cell $(i, j)$ of the result =\nrow $i$ of $L$ $\\cdot$ column $j$ of $R$.", ha="left",
            va="top", fontsize=fs(9.5), color=GREY, linespacing=1.4)

    # Key: what the highlighted cells say, with the example's numbers.
    q, k = Q[row], K[col]
    ys = [1.45, 0.9, 0.35]
    for y, face in zip(ys, [PURPLE_TINT, LIGHT_ORANGE, LIGHT_ORANGE], strict=True):
        ax.add_patch(Rectangle((0.3, y - 0.12), 0.24, 0.24, facecolor=face, edgecolor="black", linewidth=0.8))
    ax.text(0.7, ys[0], f"$q_i \\cdot k_j / \\sqrt{{d_k}}$: row \u201cchase\u201d of $Q$ {vec(q)} meets column "
            f"\u201cdogs\u201d of $K^\\top$ {vec(k)}: {num(q @ k, 'g')}/$\\sqrt{{2}}$ = {num(scores[row, col])}",
            ha="left", va="center", fontsize=fs(10.5))
    ax.text(0.7, ys[1], "row \u201cchase\u201d of $A$: the softmax of its row of scores, over the keys "
            + ", ".join(tokens), ha="left", va="center", fontsize=fs(10.5))
    ax.text(0.7, ys[2], f"row \u201cchase\u201d of $Z$ = {num(A[row, 0])}$\\,v_{{\\mathrm{{dogs}}}}$ + "
            f"{num(A[row, 1])}$\\,v_{{\\mathrm{{chase}}}}$ + \u2026 + {num(A[row, 4])}$\\,v_{{\\mathrm{{ball}}}}$"
            f" = {vec(Z[row], '.2f')}", ha="left", va="center", fontsize=fs(10.5))
    save(fig, "scores_matrix.svg")


# --------------------------------------------------------------------------------------------------------------------
# c. Chapter 3: splitting d_model into h heads and joining them again.
# --------------------------------------------------------------------------------------------------------------------
def head_split() -> None:
    # Chapter 3's story: "dogs chase the red ball" (T = 5, d_model = 4) split over h = 2 heads of d_k = 2.
    tokens, X, _, _, _ = story()
    T, d_model = X.shape
    h = 2
    dk = d_model // h
    c = 0.3  # cell size
    width, height = 12.6, 8.35
    fig, ax = new_figure(width, height, font_scale=1.45)
    head_face = HEAD_COLOURS[:h]  # the input's colours: head 0 blue, head 1 orange
    out_face = [LIGHT_GREEN, "#dadaeb"]  # the heads' outputs: new colours (green, purple tints) and hatching
    out_hatch = ["////", "\\\\\\\\"]
    lanes = [6.3, 3.2]  # vertical centres of head 0's and head 1's lanes
    mid = sum(lanes) / 2

    def token_labels(x, top, pitch=c, size=9):
        for i, tok in enumerate(tokens):
            ax.text(x - 0.07, top - i * pitch - c / 2, tok, ha="right", va="center", fontsize=fs(size))

    def caption(x, y, text, va="top", size=10, colour="black", ha="center"):
        ax.text(x, y, text, ha=ha, va=va, fontsize=fs(size), color=colour, linespacing=1.3)

    def hatched(x, top, rows, cols, faces, hatches):
        for r in range(rows):
            for j in range(cols):
                ax.add_patch(Rectangle((x + j * c, top - (r + 1) * c), c, c, facecolor=faces[j], edgecolor="black",
                                       linewidth=0.8, hatch=hatches[j]))

    # 1. The projected queries (B, T, d_model): columns i*d_k ... (i+1)*d_k - 1 belong to head i.
    x1 = 0.75
    top1 = height - 0.8
    grid(ax, x1, top1, T, d_model, c, colours=[[head_face[j // dk] for j in range(d_model)] for _ in range(T)])
    token_labels(x1, top1)
    # "head" once, left of the columns (over the token names), and each head's number over its d_k columns: two
    # labels "head 0", "head 1" of a readable size would not fit side by side over 2 x 2 cells
    caption(x1 - 0.07, top1 + 0.05, "head", va="bottom", size=9, ha="right")
    for i in range(h):
        caption(x1 + (i + 0.5) * dk * c, top1 + 0.05, f"{i}", va="bottom", size=9)
    caption(x1 + d_model * c + 0.15, top1 - T * c / 2, "$Q = XW_Q$\n($K$, $V$ alike)\n"
            "$(B, T, d_{\\mathrm{model}})$", va="center", size=10, ha="left")

    # 2. view: the same numbers, each token's row cut into h pieces of d_k (tokens still the outer axis).
    pitch2, gap2 = c + 0.13, 0.14
    w2 = d_model * c + (h - 1) * gap2
    top2 = top1 - T * c - 1.0
    arrow(ax, (x1 + d_model * c / 2, top1 - T * c - 0.06), (x1 + d_model * c / 2, top2 + 0.1))
    caption(x1 + d_model * c / 2 + 0.12, top1 - T * c - 0.5, "view", va="center", size=10, ha="left")
    for t in range(T):
        y = top2 - t * pitch2
        ax.add_patch(Rectangle((x1 - 0.05, y - c - 0.045), w2 + 0.1, c + 0.09, facecolor=LIGHT_GREY,
                               edgecolor="none"))
        for i in range(h):
            grid(ax, x1 + i * (dk * c + gap2), y, 1, dk, c, face=head_face[i])
    token_labels(x1 - 0.05, top2, pitch=pitch2)
    caption(x1 + w2 / 2, top2 - T * pitch2 - 0.05, "$(B, T, h, d_k)$: each token's\nrow cut into $h$ pieces",
            va="top", size=10)

    # 3. transpose(1, 2): the head axis moves outward; head i is a T x d_k matrix holding all T tokens.
    x3 = x1 + w2 + 2.2
    x_br = x3 - 0.72  # a bracket round the h matrices
    ax.plot([x_br + 0.1, x_br, x_br, x_br + 0.1], [lanes[0] + T * c / 2, lanes[0] + T * c / 2,
            lanes[1] - T * c / 2, lanes[1] - T * c / 2], color="black", lw=1.2)
    y_tr = top2 - T * pitch2 / 2 + 0.06
    arrow(ax, (x1 + w2 + 0.1, y_tr), (x_br - 0.04, y_tr))
    caption((x1 + w2 + x_br) / 2, y_tr + 0.08, "transpose\n(1, 2)", va="bottom", size=10)
    for i, y in enumerate(lanes):
        top = y + T * c / 2
        grid(ax, x3, top, T, dk, c, face=head_face[i])
        token_labels(x3, top)
        caption(x3 + dk * c / 2 - 0.3, top + 0.06, f"head {i}: $Q_{i}$", va="bottom", size=10)
    caption(x3 + dk * c / 2 - 0.3, lanes[1] - T * c / 2 - 0.1, "$(B, h, T, d_k)$")

    # 4. attention in each head: head i's queries meet only head i's keys (and weight only head i's values).
    x4, w4, h4 = x3 + dk * c + 0.4, 2.45, 1.0
    x_out = x4 + w4 + 0.45
    mc = 0.14  # cell of the small K_i, V_i
    for i, y in enumerate(lanes):
        arrow(ax, (x3 + dk * c + 0.06, y), (x4, y))
        box(ax, x4, y - h4 / 2, w4, h4, f"attention in head {i}\n"
            f"softmax$(Q_{i} K_{i}^\\top / \\sqrt{{d_k}})\\, V_{i}$\n$T \\times T$ weights of its own", size=9,
            edge=head_face[i], lw=2.0, linespacing=1.5)
        for n, name in enumerate(["K", "V"]):  # head i's keys and values, split the same way, drawn small
            xm = x4 + 0.6 + n * 0.95
            grid(ax, xm, y + h4 / 2 + 0.2 + T * mc, T, dk, mc, face=head_face[i])
            ax.text(xm + dk * mc + 0.07, y + h4 / 2 + 0.2 + T * mc / 2, f"${name}_{i}$", ha="left", va="center",
                    fontsize=fs(10))
            arrow(ax, (xm + dk * mc / 2, y + h4 / 2 + 0.2), (xm + dk * mc / 2, y + h4 / 2))
        arrow(ax, (x4 + w4, y), (x_out, y))
        hatched(x_out, y + T * c / 2, T, dk, [out_face[i]] * dk, [out_hatch[i]] * dk)
        caption(x_out + dk * c / 2, y + T * c / 2 + 0.06, f"$Z_{i}$", va="bottom", size=10.5)
    ax.plot([x4 - 0.2, x_out + dk * c + 0.1], [mid + 0.1, mid + 0.1], color=GREY, lw=1.0, ls=(0, (4, 3)))
    caption(x4 + w4 / 2, mid + 0.15, "no exchange between heads", va="bottom", size=9, colour=GREY)

    # 5. transpose back and reshape: the heads' outputs side by side again, (B, T, h*d_k); then W_O mixes them.
    x5 = x_out + dk * c + 0.7
    top5 = mid + T * c / 2 + 0.1
    hatched(x5, top5, T, d_model, [out_face[j // dk] for j in range(d_model)],
            [out_hatch[j // dk] for j in range(d_model)])
    for i, y in enumerate(lanes):
        arrow(ax, (x_out + dk * c + 0.06, y), (x5 + (i + 0.5) * dk * c, top5 + 0.04 if i == 0 else top5 - T * c - 0.04))
    caption(x5 + d_model * c + 0.1, top5 - T * c / 2, "concatenated:\ntranspose (1, 2),\nreshape\n"
            "$(B, T, h \\cdot d_k)$", va="center", size=9.5, ha="left")
    y6 = 1.95  # top edge of the output
    arrow(ax, (x5 + d_model * c / 2, top5 - T * c - 0.5), (x5 + d_model * c / 2, y6 + 0.06))
    xW, topW = x5 + d_model * c / 2 + 0.75, y6 + 0.15 + d_model * c
    grid(ax, xW, topW, d_model, d_model, c, face=LIGHT_GREY)
    caption(xW - 0.1, topW - d_model * c / 2, "$\\cdot\\,W_O$", va="center", size=10.5, ha="right")
    caption(xW + d_model * c / 2, topW + 0.06, "$W_O$ (4 \u00d7 4)", va="bottom", size=9.5)
    grid(ax, x5, y6, T, d_model, c, face=LIGHT_GREY)
    caption(x5 + d_model * c + 0.1, y6 - T * c / 2, "output\n$(B, T, d_{\\mathrm{model}})$", va="center",
            size=9.5, ha="left")

    ax.text(0.2, 0.5, f"Chapter 3's story: $T = {T}$ tokens, $d_{{\\mathrm{{model}}}} = {d_model}$, $h = {h}$ heads "
            f"of $d_k = {dk}$; one batch element.\nBlue, orange: the heads' columns of $Q$, $K$, $V$. Hatched "
            "green, purple: the heads' outputs.\n$W_O$ ($d_{\\mathrm{model}} \\times d_{\\mathrm{model}}$) mixes "
            "both heads into every output column (grey).", ha="left", va="center", fontsize=fs(9.5),
            linespacing=1.4)
    save(fig, "head_split.svg")


# --------------------------------------------------------------------------------------------------------------------
# d. Chapter 4: combining a padding mask and a causal mask, and what softmax makes of them.
# --------------------------------------------------------------------------------------------------------------------
def mask_pipeline() -> None:
    # Chapter 4's worked example: the short sentence "dogs chase ball" padded to 4 with a zero vector, with chapter 1's
    # embeddings and projections. Every number drawn is computed here, as chapter 4 computes it.
    story_tokens, story_X, W_Q, W_K, _ = story()
    tokens = ["dogs", "chase", "ball", "pad"]
    X = np.vstack([story_X[[story_tokens.index(t) for t in tokens[:3]]], np.zeros((1, 4))])  # padding: a zero vector
    scores = (X @ W_Q) @ (X @ W_K).T / math.sqrt(W_Q.shape[1])  # (T, S): Q K^T / sqrt(d_k)
    S = T = len(tokens)
    pad = np.array([True, True, True, False])  # (S,): the last key is padding (True = may attend)
    broadcast = np.broadcast_to(pad[None, :], (T, S))  # (B, 1, 1, S) -> (B, 1, T, S): the row copied to every query
    causal = np.tril(np.ones((T, S), dtype=bool))  # (T, S): key j <= query i
    combined = broadcast & causal
    weights = softmax_rows(scores, combined)  # masked entries get exactly 0

    c, cw = 0.5, 0.62  # a cell's height and width: wide enough for "−0.35", its column's key label above it
    width, height = 10.4, 11.0
    fig, ax = new_figure(width, height, font_scale=1.1)
    w = S * cw
    col1, col2, col3 = 1.0, 4.45, 7.9
    y_pad = height - 1.0  # top edge of the padding row
    top1, top2 = y_pad - c - 1.35, 3.95  # top edges of the two rows of 4 x 4 grids

    def ticks(m):
        return [["\u2713" if v else "\u2717" for v in r] for r in m]

    def tick_colours(m):
        return [[LIGHT_BLUE if v else LIGHT_ORANGE for v in r] for r in m]

    def titled(x, top, rows, title, shape, note="", lift=0.12):
        ax.text(x + w / 2, top + lift, title, ha="center", va="bottom", fontsize=fs(11))
        ax.text(x + w / 2, top - rows * c - 0.1, shape, ha="center", va="top", fontsize=fs(11))
        if note:
            ax.text(x + w / 2, top - rows * c - 0.45, note, ha="center", va="top", fontsize=fs(10), color=GREY,
                    linespacing=1.3)

    def key_labels(x, top):
        for j, token in enumerate(tokens):
            ax.text(x + (j + 0.5) * cw, top + 0.06, token, ha="center", va="bottom", fontsize=fs(9), color=GREY)

    def query_labels(x, top):
        for i, token in enumerate(tokens):
            ax.text(x - 0.08, top - (i + 0.5) * c, token, ha="right", va="center", fontsize=fs(10), color=GREY)

    # Row 1: the padding row, broadcast to every query row; the causal mask; their logical and.
    grid(ax, col1, y_pad, 1, S, c, wide=cw, values=ticks([pad]), colours=tick_colours([pad]), size=12)
    key_labels(col1, y_pad)
    ax.text(col1 + w / 2, y_pad + 0.38, "padding mask of one sentence", ha="center", va="bottom", fontsize=fs(11))
    ax.text(col1 + w + 0.15, y_pad - c / 2, "$(B, S) \\to (B, 1, 1, S)$", ha="left", va="center", fontsize=fs(11))
    arrow(ax, (col1 + w / 2, y_pad - c - 0.06), (col1 + w / 2, top1 + 0.42))
    ax.text(col1 + w / 2 + 0.12, (y_pad - c + top1 + 0.4) / 2, "broadcast: the row is\ncopied to every query row",
            ha="left", va="center", fontsize=fs(10), linespacing=1.3)
    grid(ax, col1, top1, T, S, c, wide=cw, values=ticks(broadcast), colours=tick_colours(broadcast), size=12)
    key_labels(col1, top1)
    query_labels(col1, top1)
    titled(col1, top1, T, "", "$(B, 1, T, S)$", "padding, broadcast")
    grid(ax, col3, top1, T, S, c, wide=cw, values=ticks(causal), colours=tick_colours(causal), size=12)
    key_labels(col3, top1)
    titled(col3, top1, T, "causal mask", "$(T, S)$", "key $j \\leq$ query $i$", lift=0.38)
    grid(ax, col2, top1, T, S, c, wide=cw, values=ticks(combined), colours=tick_colours(combined), size=12)
    key_labels(col2, top1)
    titled(col2, top1, T, "combined mask", "$(B, 1, T, S)$", "broadcasts over $h$", lift=0.38)
    y_and = top1 - 2 * c
    arrow(ax, (col1 + w + 0.08, y_and), (col2 - 0.08, y_and))
    arrow(ax, (col3 - 0.08, y_and), (col2 + w + 0.08, y_and))
    for x in [(col1 + w + col2) / 2, (col2 + w + col3) / 2]:
        ax.text(x, y_and + 0.1, "and", ha="center", va="bottom", fontsize=fs(11), fontweight="bold")

    # Row 2: scores, masked scores, weights.
    grid(ax, col1, top2, T, S, c, wide=cw, values=[[num(v) for v in r] for r in scores], face=LIGHT_GREY, size=10)
    key_labels(col1, top2)
    query_labels(col1, top2)
    titled(col1, top2, T, "scores $QK^\\top / \\sqrt{d_k}$", "$(B, h, T, S)$", lift=0.38)
    masked = [[num(scores[i, j]) if combined[i, j] else "\u2212\u221e" for j in range(S)] for i in range(T)]
    colours = [[LIGHT_GREY if combined[i, j] else LIGHT_ORANGE for j in range(S)] for i in range(T)]
    sizes = [[10 if combined[i, j] else 13 for j in range(S)] for i in range(T)]  # ∞ is drawn small for its size
    grid(ax, col2, top2, T, S, c, wide=cw, values=masked, colours=colours, sizes=sizes)
    key_labels(col2, top2)
    titled(col2, top2, T, "masked scores", "$(B, h, T, S)$", lift=0.38)
    arrow(ax, (col1 + w + 0.08, top2 - 2 * c), (col2 - 0.08, top2 - 2 * c))
    arrow(ax, (col2 + w / 2, top1 - T * c - 0.8), (col2 + w / 2, top2 + 0.7))
    ax.text(col2 + w / 2 + 0.12, (top1 - T * c - 0.8 + top2 + 0.7) / 2, "where \u2717:\nscore \u2192 \u2212\u221e",
            ha="left", va="center", fontsize=fs(10), linespacing=1.3)

    values = [[num(v) if v > 0 else "0" for v in r] for r in weights]
    colours = [[LIGHT_GREEN if v > 0 else "white" for v in r] for r in weights]
    grid(ax, col3, top2, T, S, c, wide=cw, values=values, colours=colours, size=10)
    key_labels(col3, top2)
    titled(col3, top2, T, "attention weights $A$", "$(B, h, T, S)$", "each row sums to 1", lift=0.38)
    arrow(ax, (col2 + w + 0.08, top2 - 2 * c), (col3 - 0.08, top2 - 2 * c))
    ax.text((col2 + w + col3) / 2, top2 - 2 * c + 0.1, "softmax\nover $S$", ha="center", va="bottom",
            fontsize=fs(10), linespacing=1.2)
    # The padding token's own query row: computed like any other, then its output is thrown away.
    i_pad = tokens.index("pad")
    y_row = top2 - i_pad * c
    ax.add_patch(Rectangle((col3, y_row - c), w, c, facecolor="none", edgecolor=GREY, linewidth=0, hatch="///"))
    ax.add_patch(Rectangle((col3 - 0.04, y_row - c - 0.04), w + 0.08, c + 0.08, facecolor="none",
                           edgecolor="black", linewidth=1.6, linestyle=(0, (3, 2))))
    ax.text(col2 + w + 0.25, top2 - T * c - 1.0, "Hatched row: the padding token's own query.\n"
            "It is computed like any other, then ignored:\nthe loss (or the pooling) throws its output away.",
            ha="right", va="top", fontsize=fs(10), linespacing=1.3)
    arrow(ax, (col2 + w + 0.3, top2 - T * c - 1.2), (col3 - 0.08, y_row - c / 2), rad=0.35)

    note = ("\u2713 = may attend (True in tfm), \u2717 = may not (False).\nRows are queries, columns keys: "
            "\u201cdogs chase ball\u201d\nand one padding token, with chapter 1's $X$, $W_Q$, $W_K$.\n"
            "Query $i$ sees the keys $j \\leq i$ that are not padding;\nevery masked entry gets weight exactly 0.")
    ax.text(col2 + 1.1, y_pad + 0.5, note, ha="left", va="top", fontsize=fs(10), linespacing=1.4)
    save(fig, "mask_pipeline.svg")


FIGURES = [qkv_flow, scores_matrix, head_split, mask_pipeline]
