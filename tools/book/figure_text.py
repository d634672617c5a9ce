"""The size of the smallest text of every figure a notebook shows, stored beside the figure, so that a test can tell
whether a reader can read it at the size the page shows it.

`make execute` (tools/book/notebooks.execute) starts each kernel with this IPython extension loaded. It wraps the
function Jupyter uses to turn a matplotlib figure into a PNG (IPython's `print_figure`, which the inline backend
registers as the PNG formatter of every figure), and returns with the image the metadata
``{"smallest_text_px": <px>}`` (null for a figure without text): the size of the smallest text drawn (tick
labels, labels, titles, legends, annotations), in pixels of the PNG. The page shows a figure at most as wide as its
column (`DISPLAY_WIDTH` CSS pixels at a 1280-px window; tests/test_browser.py measures it), one PNG pixel per CSS
pixel below that, so its text shows at ``smallest_text_px * min(1, DISPLAY_WIDTH / png_width)`` pixels.

The schematic figures (tools/figures) record the same quantity when they are drawn. The readers' Jupyter and Colab,
and nbval, run without this extension: it changes nothing a reader sees.
"""

from __future__ import annotations

import struct

from tools import drawn_text_points

# The widest a figure is shown on the website at a window width of 1280 px: the content column, in CSS pixels
# (measured by tests/test_browser.py, which fails if the page lays figures out otherwise).
DISPLAY_WIDTH = 688
# The smallest text a reader should have to read, in CSS pixels as shown.
SMALLEST_TEXT_PX = 9.0
METADATA_KEY = "smallest_text_px"


def smallest_text_points(fig) -> float | None:
    """The font size, in points, of the smallest text of ``fig`` (drawn on its canvas); None if it has no text."""
    _, sizes = drawn_text_points(fig.canvas.draw)
    return min(sizes) if sizes else None


def png_width(data: bytes) -> int:
    """The width in pixels of a PNG image (from its IHDR chunk)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG image")
    return struct.unpack(">I", data[16:20])[0]


def shown_text_px(smallest_text_px: float, width_px: int, display_width: int = DISPLAY_WIDTH) -> float:
    """The size in CSS pixels at which the page shows text of ``smallest_text_px`` in an image ``width_px`` wide."""
    return smallest_text_px * min(1.0, display_width / width_px)


def load_ipython_extension(ipython) -> None:
    from IPython.core import pylabtools

    original = pylabtools.print_figure
    if getattr(original, "records_text_size", False):
        return

    def print_figure(fig, fmt="png", bbox_inches="tight", base64=False, **kwargs):
        if fmt != "png":
            return original(fig, fmt, bbox_inches, base64, **kwargs)
        data, sizes = drawn_text_points(lambda: original(fig, fmt, bbox_inches, base64, **kwargs))
        if data is None:
            return data
        dpi = kwargs.get("dpi", fig.dpi)
        return data, {METADATA_KEY: round(min(sizes) * dpi / 72, 2) if sizes else None}

    print_figure.records_text_size = True
    pylabtools.print_figure = print_figure


def notebook_figures(path) -> list[dict]:
    """Every PNG figure stored in the notebook at ``path``: its cell (counted from 1, as ruff counts), width in
    pixels, smallest text in PNG pixels (None: no text; missing: not executed with this extension) and as shown."""
    import base64
    import json
    from pathlib import Path

    found = []
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells, start=1):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] != "code" or tags & {"remove-cell", "remove-output"}:
            continue
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png is None:
                continue
            width = png_width(base64.b64decode(png if isinstance(png, str) else "".join(png)))
            metadata = output.get("metadata", {}).get("image/png", {})
            text = metadata.get(METADATA_KEY, "missing")
            shown = shown_text_px(text, width) if isinstance(text, int | float) else None
            found.append({"cell": index, "width": width, "text_px": text, "shown_px": shown})
    return found


def main(argv: list[str]) -> int:
    """Report every figure of the notebooks named (all chapters if none): ``python -m tools.book.figure_text``."""
    from pathlib import Path

    from tools import ROOT

    paths = [Path(p) for p in argv] or sorted((ROOT / "chapters").glob("*.ipynb"))
    small = 0
    for path in paths:
        for figure in notebook_figures(path):
            shown = figure["shown_px"]
            verdict = ("not measured: run make execute" if figure["text_px"] == "missing" else "no text"
                       if figure["text_px"] is None else "ok" if shown >= SMALLEST_TEXT_PX else "TOO SMALL")
            small += verdict not in ("ok", "no text")
            size = f"{shown:4.1f} px" if shown is not None else "   -   "
            print(f"{path.name} cell {figure['cell']:3}: {figure['width']:5} px wide, smallest text shown at "
                  f"{size}: {verdict}")
    print(f"{small} figures with text under {SMALLEST_TEXT_PX:g} px at the page's width ({DISPLAY_WIDTH} px)")
    return 1 if small else 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
