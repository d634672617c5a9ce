"""Figures a reader can read at the size the page shows them: every figure's smallest text is at least 9 CSS pixels
on the website at a window width of 1280 px, for the chapters' plots (stored with their smallest text by
tools/book/figure_text.py, which `make execute` loads) and for the schematics (tools/figures records theirs when it
draws them). tests/test_browser.py checks, in a browser, that the page shows figures as wide as assumed here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tools.book import figure_text  # noqa: E402
from tools.book.figure_text import DISPLAY_WIDTH, SMALLEST_TEXT_PX  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
SCHEMATICS = ROOT / "src" / "tfm" / "schematics"
CSS_PX_PER_INCH, PT_PER_INCH = 96, 72


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_of_a_chapter_has_text_a_reader_can_read(path):
    figures = figure_text.notebook_figures(path)
    unmeasured = [f["cell"] for f in figures if f["text_px"] == "missing"]
    assert not unmeasured, (f"{path.name}: figures of cells {unmeasured} were stored without the size of their text: "
                            "refresh them with make execute (tools/book/figure_text.py)")
    small = [f"cell {f['cell']}: {f['width']} px wide, text {f['text_px']} px, shown at {f['shown_px']:.1f} px"
             for f in figures if f["text_px"] is not None and f["shown_px"] < SMALLEST_TEXT_PX]
    assert not small, (f"{path.name}: text under {SMALLEST_TEXT_PX:g} px at the page's width ({DISPLAY_WIDTH} px): "
                       f"{small}; draw the figure about 7 inches wide with text of 7 points or more")


def schematic_widths() -> dict[str, float]:
    """Each schematic's own width in inches, read from its SVG (matplotlib writes it in points)."""
    widths = {}
    for svg in sorted(SCHEMATICS.glob("*.svg")):
        head = svg.read_text(encoding="utf-8")[:2000]
        widths[svg.name] = float(re.search(r'<svg[^>]*\swidth="([\d.]+)pt"', head).group(1)) / PT_PER_INCH
    return widths


def test_every_schematic_has_text_a_reader_can_read():
    recorded = json.loads((SCHEMATICS / "text_sizes.json").read_text(encoding="utf-8"))
    widths = schematic_widths()
    assert set(recorded) == set(widths), "text_sizes.json and the SVGs disagree: redraw them with make figures"
    small = []
    for name, width in widths.items():
        assert abs(recorded[name]["width_in"] - width) < 0.01, f"{name} changed since its text was measured"
        natural = width * CSS_PX_PER_INCH  # an SVG is shown at its own size in CSS pixels, up to the column's
        shown = recorded[name]["smallest_text_pt"] * CSS_PX_PER_INCH / PT_PER_INCH * min(1, DISPLAY_WIDTH / natural)
        if shown < SMALLEST_TEXT_PX:
            small.append(f"{name}: {shown:.1f} px")
    assert not small, f"schematics with text under {SMALLEST_TEXT_PX:g} px on the page: {small}"


def _figure(width: float, points: float, ticks: float = 10):
    fig, ax = plt.subplots(figsize=(width, 3))
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("small label", fontsize=points)
    ax.tick_params(labelsize=ticks)
    return fig


def test_the_measure_fails_on_a_wide_figure_with_small_text():
    # A 12-inch figure with 8-point text, shown 688 px wide: about 6.4 px. The same text on a 7-inch figure: 11 px.
    for width, points, readable in [(12, 8, False), (7, 9, True), (7, 6, False), (5, 8, True)]:
        fig = _figure(width, points, ticks=points)
        smallest = figure_text.smallest_text_points(fig)
        plt.close(fig)
        assert smallest == points
        shown = figure_text.shown_text_px(points * 100 / 72, int(width * 100))
        assert (shown >= SMALLEST_TEXT_PX) == readable, (width, points, shown)


def test_text_that_is_not_drawn_does_not_count():
    fig = _figure(7, 12, ticks=10)
    fig.axes[0].text(0.5, 0.5, "hidden", fontsize=3, visible=False)
    fig.axes[0].set_title("   ", fontsize=2)  # blank: nothing to read
    assert figure_text.smallest_text_points(fig) == 10
    fig.axes[0].axis("off")  # its tick labels and label are no longer drawn
    fig.axes[0].text(0.5, 0.5, "shown", fontsize=14)
    assert figure_text.smallest_text_points(fig) == 14
    plt.close(fig)


def test_the_kernel_extension_stores_the_size_with_the_figure():
    """In a real IPython shell with the extension loaded, a figure's PNG comes with its smallest text in pixels."""
    script = """
import json
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
ip.extension_manager.load_extension("tools.book.figure_text")
ip.run_cell("%matplotlib inline")
ip.display_formatter.active_types = ["text/plain", "image/png"]  # as in a notebook's kernel
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(7, 3)); ax.plot([0, 1]); ax.set_title("t", fontsize=9)
ax.tick_params(labelsize=10)
data, metadata = ip.display_formatter.format(fig)
print(json.dumps(metadata.get("image/png")))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    metadata = json.loads(result.stdout.strip().splitlines()[-1])
    dpi = matplotlib.rcParams["figure.dpi"]
    assert metadata == {figure_text.METADATA_KEY: round(9 * dpi / 72, 2)}
