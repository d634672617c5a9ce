"""Schematics of chapter 16 (training beyond one device): what each device keeps under data parallelism and ZeRO."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from tools.figures.style import BLUE, GREEN, GREY, LIGHT_BLUE, LIGHT_GREEN, LIGHT_ORANGE, ORANGE, fs, new_figure, save


# --------------------------------------------------------------------------------------------------------------------
# a. Chapter 16: the model states each of 4 devices holds under data parallelism and ZeRO stages 1 to 3.
# --------------------------------------------------------------------------------------------------------------------
def zero_stages() -> None:
    n_devices = 4
    parts = [("weights", 2, BLUE, LIGHT_BLUE), ("gradients", 2, GREEN, LIGHT_GREEN),
             ("optimizer state", 12, ORANGE, LIGHT_ORANGE)]
    rows = [("data parallel", 0), ("ZeRO-1", 1), ("ZeRO-2", 2), ("ZeRO-3", 3)]
    unit = 0.11  # inches per byte of a parameter: the optimizer bar (12 bytes) is 1.32 inches long
    device_w, bar_h, gap = 1.9, 0.2, 0.07
    left, top = 1.9, 5.75
    fig, ax = new_figure(10.6, 6.3, font_scale=1.1)
    ax.text(0.15, 6.15, "What each of 4 devices keeps, per parameter (mixed-precision Adam: 2 + 2 + 12 bytes)",
            ha="left", va="top", fontsize=fs(12), fontweight="bold")
    for d in range(n_devices):
        ax.text(left + d * (device_w + 0.2) + device_w / 2, top + 0.02, f"device {d}", ha="center", va="bottom",
                fontsize=fs(10))
    row_h = 3 * (bar_h + gap) + 0.45
    for i, (name, stage) in enumerate(rows):
        y0 = top - 0.1 - i * row_h
        total = sum(b / (n_devices if k >= 3 - stage else 1) for k, (_, b, _, _) in enumerate(parts))
        ax.text(0.15, y0 - 0.45, name, ha="left", va="center", fontsize=fs(11), fontweight="bold")
        ax.text(0.15, y0 - 0.75, f"{total:g} bytes", ha="left", va="center", fontsize=fs(10))
        for d in range(n_devices):
            x0 = left + d * (device_w + 0.2)
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
    y_key = 0.25
    for k, (label, nbytes, dark, light) in enumerate(parts):
        x = 0.15 + k * 2.35
        ax.add_patch(Rectangle((x, y_key - 0.1), 0.3, 0.2, facecolor=light, edgecolor="black", linewidth=0.6))
        ax.add_patch(Rectangle((x + 0.3, y_key - 0.1), 0.15, 0.2, facecolor=dark, edgecolor="black", linewidth=0.6))
        ax.text(x + 0.55, y_key, f"{label} ({nbytes} B)", ha="left", va="center", fontsize=fs(10))
    ax.text(7.3, y_key, "pale: a full copy; dark: this device's shard", ha="left", va="center", fontsize=fs(9))
    save(fig, "zero_stages.svg")


FIGURES = [zero_stages]
