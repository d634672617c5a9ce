"""Schematics of chapter 16 (training beyond one device): what each device keeps under data parallelism and ZeRO."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from tfm.viz import COLOURS, LIGHT
from tools.figures.style import GREY, fs, new_figure, save


# --------------------------------------------------------------------------------------------------------------------
# a. Chapter 16: the model states each of 4 devices holds under data parallelism and ZeRO stages 1 to 3.
# --------------------------------------------------------------------------------------------------------------------
def zero_stages() -> None:
    """Drawn 7.4 inches wide, about the page's width, so that its smallest text (8.5 pt) shows at 11 px. Its
    vertical layout (the key below 0.45 in, the devices' names at 5.77 in, the rows of stages 2 and 3 below 3.2 in)
    is the one tools/course/slide_panels.py cuts its slide panels along."""
    n_devices = 4
    parts = [(name, nbytes, COLOURS[name], LIGHT[COLOURS[name]])
             for name, nbytes in [("weights", 2), ("gradients", 2), ("optimizer state", 12)]]
    rows = [("data parallel", 0), ("ZeRO-1", 1), ("ZeRO-2", 2), ("ZeRO-3", 3)]
    unit = 0.105  # inches per byte of a parameter: the optimizer bar (12 bytes) is 1.26 inches long
    device_w, step, bar_h, gap = 1.38, 1.54, 0.2, 0.07  # a device's width, from one device to the next
    left, top = 1.3, 5.75
    fig, ax = new_figure(7.4, 6.3)
    ax.text(0.1, 6.22, "What each of 4 devices keeps, per parameter, under mixed-precision Adam", ha="left",
            va="top", fontsize=fs(10.5), fontweight="bold")
    for d in range(n_devices):
        ax.text(left + d * step + device_w / 2, top + 0.02, f"device {d}", ha="center", va="bottom", fontsize=fs(9))
    row_h = 3 * (bar_h + gap) + 0.45
    for i, (name, stage) in enumerate(rows):
        y0 = top - 0.1 - i * row_h
        total = sum(b / (n_devices if k >= 3 - stage else 1) for k, (_, b, _, _) in enumerate(parts))
        ax.text(0.1, y0 - 0.45, name, ha="left", va="center", fontsize=fs(10), fontweight="bold")
        ax.text(0.1, y0 - 0.75, f"{total:g} bytes", ha="left", va="center", fontsize=fs(9))
        for d in range(n_devices):
            x0 = left + d * step
            ax.add_patch(Rectangle((x0 - 0.05, y0 - row_h + 0.3), device_w + 0.1, row_h - 0.25, facecolor="none",
                                   edgecolor=GREY, linewidth=0.8))
            for k, (_, nbytes, dark, light) in enumerate(parts):
                y = y0 - (k + 1) * (bar_h + gap)
                length = nbytes * unit
                ax.add_patch(Rectangle((x0, y), length, bar_h, facecolor="white", edgecolor=GREY, linewidth=0.6))
                if k >= 3 - stage:  # sharded: this device keeps its quarter only
                    piece = length / n_devices
                    ax.add_patch(Rectangle((x0 + d * piece, y), piece, bar_h, facecolor=dark, edgecolor="black",
                                           linewidth=0.6))
                else:
                    ax.add_patch(Rectangle((x0, y), length, bar_h, facecolor=light, edgecolor="black",
                                           linewidth=0.6))
    y_key = 0.33  # the key, in two lines below the last row
    for k, (label, nbytes, dark, light) in enumerate(parts):
        x = 0.1 + k * 2.05
        ax.add_patch(Rectangle((x, y_key - 0.08), 0.26, 0.16, facecolor=light, edgecolor="black", linewidth=0.6))
        ax.add_patch(Rectangle((x + 0.26, y_key - 0.08), 0.13, 0.16, facecolor=dark, edgecolor="black",
                               linewidth=0.6))
        ax.text(x + 0.47, y_key, f"{label} ({nbytes} bytes)", ha="left", va="center", fontsize=fs(9))
    ax.text(0.1, 0.1, "pale: a full copy on every device; dark: this device's shard (a quarter)", ha="left",
            va="center", fontsize=fs(8.5))
    save(fig, "zero_stages.svg")


FIGURES = [zero_stages]
