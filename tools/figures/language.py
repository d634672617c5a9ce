"""The schematic of chapter 14 (a language model of real text), drawn with the helpers of style.py;
`python -m tools.figures` draws every figure.
"""

from __future__ import annotations

from tools.figures.style import (
    BLUE,
    GREY,
    LIGHT_BLUE,
    LIGHT_GREY,
    LIGHT_ORANGE,
    ORANGE,
    arrow,
    box,
    fs,
    new_figure,
    save,
)

TOKENS = ["the", "hash", "of", "an", "object", "…", "the", "hash"]


# --------------------------------------------------------------------------------------------------------------------
# Chapter 14: the two-layer circuit of an induction head (Elhage et al., 2021; Olsson et al., 2022).
# --------------------------------------------------------------------------------------------------------------------
def induction_circuit() -> None:
    fig, ax = new_figure(11.0, 6.3, font_scale=1.1)
    x0, pitch, w = 2.3, 1.0, 0.84
    xs = [x0 + i * pitch for i in range(len(TOKENS))]  # left edge of each token's column
    mid = [x + w / 2 for x in xs]
    before, after, now = 1, 2, len(TOKENS) - 1  # "hash" earlier, the token that followed it ("of"), "hash" now
    y_tok, y_l0, y_l1, y_out = 1.05, 2.45, 3.85, 5.15

    ax.text(0.2, 6.15, "An induction head: “… A B … A” → predict B", ha="left", va="top", fontsize=fs(12),
            fontweight="bold")
    for label, y in [("tokens", y_tok + 0.21), ("layer 0", y_l0), ("layer 1", y_l1), ("next token", y_out + 0.21)]:
        ax.text(0.2, y, label, ha="left", va="center", fontsize=fs(11), fontweight="bold")
    ax.text(0.2, y_l0 - 0.3, "previous-token head:\neach position copies\nthe token before it", ha="left", va="top",
            fontsize=fs(9.5), color=BLUE)
    ax.text(0.2, y_l1 - 0.3, "induction head:\nfinds where A was\nbefore, copies what\nfollowed it", ha="left",
            va="top", fontsize=fs(9.5), color=ORANGE)

    # The residual stream of every position: a vertical line from its token upwards.
    for i, x in enumerate(mid):
        ax.plot([x, x], [y_tok + 0.45, y_out - 0.05 if i == now else y_l1 + 0.55], color=LIGHT_GREY, lw=3,
                zorder=0, solid_capstyle="butt")
    for i, (x, token) in enumerate(zip(xs, TOKENS, strict=True)):
        face = LIGHT_ORANGE if i in (before, now) else (LIGHT_BLUE if i == after else "white")
        box(ax, x, y_tok, w, 0.42, token, face=face, size=11)
    ax.text(mid[before], y_tok - 0.1, "A", ha="center", va="top", fontsize=fs(10), color=GREY)
    ax.text(mid[after], y_tok - 0.1, "B", ha="center", va="top", fontsize=fs(10), color=GREY)
    ax.text(mid[now], y_tok - 0.1, "A again (now)", ha="center", va="top", fontsize=fs(10), color=GREY)

    # Layer 0: every position reads the position before it; the one that matters writes "after 'hash'" into 'of'.
    for i in range(1, len(TOKENS)):
        strong = i == after
        arrow(ax, (mid[i - 1] + 0.04, y_l0 - 0.15), (mid[i] - 0.04, y_l0 - 0.15), colour=BLUE if strong else GREY,
              lw=2.0 if strong else 0.8, rad=-0.5)
    box(ax, mid[after] - 0.62, y_l0 + 0.22, 1.24, 0.36, "“after hash”", face=LIGHT_BLUE, edge=BLUE, size=10)

    # Layer 1: the query of "hash" (now) matches the key "after hash" at 'of'; the value copies 'of' forward.
    arrow(ax, (mid[after] + 0.1, y_l1 - 0.05), (mid[now] - 0.1, y_l1 - 0.05), colour=ORANGE, lw=2.4, rad=-0.28)
    box(ax, mid[after] - 0.95, y_l1 - 0.62, 1.9, 0.36, "key: “after hash”", face="white", edge=ORANGE, size=9.5)
    box(ax, mid[now] - 0.8, y_l1 - 0.62, 1.6, 0.36, "query: “hash”", face="white", edge=ORANGE, size=9.5)
    ax.text((mid[after] + mid[now]) / 2, y_l1 + 0.72, "query and key match: attend to “of”, copy its token (value)",
            ha="center", va="bottom", fontsize=fs(10), color=ORANGE)

    # The prediction.
    box(ax, mid[now] - 0.55, y_out, 1.1, 0.42, "of", face=LIGHT_ORANGE, edge=ORANGE, size=11, fontweight="bold")
    arrow(ax, (mid[now], y_l1 + 0.6), (mid[now], y_out - 0.02), colour=ORANGE, lw=1.6)

    ax.text(0.2, 0.05, "One layer is not enough: before layer 0 has run, the key of “of” holds only “of” and its "
            "position. The query must find the\nposition whose predecessor matches, so the key needs a layer below to "
            "move “hash” into it (K-composition).", ha="left", va="bottom", fontsize=fs(10))
    save(fig, "induction_circuit.svg")


FIGURES = [induction_circuit]
