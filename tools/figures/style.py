"""The shared drawing style of the book's schematic figures: fonts, colours and the small helpers (boxes, arrows, grids)
that every figure module of this folder draws with. Nothing here draws a figure: `python -m tools.figures` draws them.

Conventions: inch units (a figure's axes span it, one data unit = one inch), glyphs drawn as paths so that every
browser shows the same layout, deterministic SVG (fixed ids, no date), colour-blind-safe colours (the first tab10
colours and light tints), every shape labelled in the figure or its caption.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("svg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import patheffects  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

# Inside the package, so that a chapter opened alone in Colab (tfm installed, no repository) can show them.
ASSETS = Path(__file__).resolve().parents[2] / "src" / "tfm" / "schematics"

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
         values=None, size=9, colours=None, wide=None, sizes=None):
    """A rows x cols grid of cells with its top-left corner at (x, y); optional values (strings) in the cells. The
    cells are `cell` high and `wide` wide (`cell` if not given); `sizes`, a font size per cell, overrides `size`."""
    wide = cell if wide is None else wide
    for i in range(rows):
        for j in range(cols):
            fc = face
            if colours is not None:
                fc = colours[i][j]
            if highlight_row is not None and i == highlight_row:
                fc = hl_face
            if highlight_col is not None and j == highlight_col:
                fc = hl_face
            ax.add_patch(Rectangle((x + j * wide, y - (i + 1) * cell), wide, cell, facecolor=fc,
                                   edgecolor="black", linewidth=0.8))
            if values is not None:
                ax.text(x + (j + 0.5) * wide, y - (i + 0.5) * cell, values[i][j], ha="center", va="center",
                        fontsize=fs(size if sizes is None else sizes[i][j]))


def num(v, fmt=".2f") -> str:
    """A number as drawn: fixed format, a true minus sign, no negative zero."""
    return format(float(v) + 0.0, fmt).replace("-", "\u2212")


def vec(v, fmt="g") -> str:
    return "(" + ", ".join(num(c, fmt) for c in v) + ")"


def halo_line(ax, xs, ys, colour, lw=1.6, zorder=3):
    """A line drawn over a white halo, so that a line it crosses is visibly interrupted (no junction)."""
    ax.plot(xs, ys, color=colour, lw=lw, zorder=zorder, solid_capstyle="butt",
            path_effects=[patheffects.Stroke(linewidth=lw + 5, foreground="white"), patheffects.Normal()])
