"""The shared drawing style of the book's schematic figures: fonts, colours and the small helpers (boxes, arrows, grids)
that every figure module of this folder draws with. Nothing here draws a figure: `python -m tools.figures` draws them.

Conventions: inch units (a figure's axes span it, one data unit = one inch), glyphs drawn as paths so that every
browser shows the same layout, deterministic SVG (fixed ids, no date), colour-blind-safe colours (the first tab10
colours and light tints), every shape labelled in the figure or its caption.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("svg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import patheffects  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

# The book's colours (colour-blind safe, one per concept), shared with the chapters' own plots: tfm.viz holds them.
from tfm.viz import (  # noqa: E402, F401  (the figure modules import them from here)
    BLUE,
    GREEN,
    GREY,
    HEAD_COLOURS,
    LIGHT_BLUE,
    LIGHT_GREEN,
    LIGHT_GREY,
    LIGHT_ORANGE,
    ORANGE,
)
from tools import drawn_text_points  # noqa: E402

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


# The size of each schematic's smallest text, in points at the figure's own width (recorded when it is drawn; its
# glyphs are paths, so the SVG does not say): tests/test_figures.py derives the size a reader sees on the page.
TEXT_SIZES = ASSETS / "text_sizes.json"


def save(fig, name: str) -> None:
    ASSETS.mkdir(exist_ok=True)
    _, sizes = drawn_text_points(lambda: fig.savefig(ASSETS / name, format="svg",
                                                     metadata={"Date": None, "Creator": None}))
    recorded = json.loads(TEXT_SIZES.read_text(encoding="utf-8")) if TEXT_SIZES.exists() else {}
    recorded[name] = {"smallest_text_pt": round(min(sizes), 2), "width_in": round(fig.get_figwidth(), 3)}
    TEXT_SIZES.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n", encoding="utf-8")
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
