"""A schematic on slides: drawn again by tools/figures and, where the whole is too large for its text to be read on a
slide, shown in panels (PANELS), slide after slide, in the order a lecture tells it. Each panel is cut where no box
or text is cut through (cut_through; tests/test_slides.py checks every panel); a panel of several rectangles shows
them one above the other at one scale. Each panel is fitted and saved by slide_figures.save.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tools.course.slide_figures import BOX, SlideFigure, save

# A schematic drawn for a book page is too tall (or too wide) for its text to be readable on a slide whole: it is
# shown in panels, slide after slide, in the order a lecture tells it: each a rectangle (x0, x1, y0, y1) of it in
# inches (its drawing units), cut where nothing is cut through, or several rectangles shown one above the other (a
# key, or the titles of the columns, above the part of the drawing they explain).
PANELS = {
    "qkv_flow": [(0.0, 7.5, 4.05, 9.1), (0.0, 7.5, 0.0, 4.9)],  # tokens to scores; scores to z
    "scores_matrix": [(0.0, 11.8, 0.0, 1.95), (0.0, 9.3, 6.1, 9.9), (0.0, 5.9, 2.0, 6.0), (9.6, 11.8, 6.2, 9.9),
                      (5.9, 11.8, 2.0, 6.0)],  # the key; K and its transpose; Q K^T; V; softmax and A V
    "head_split": [[(-0.2, 3.45, 5.3, 8.35), (0.0, 8.7, 0.0, 1.25)], (-0.2, 3.4, 1.75, 5.35),
                   (3.4, 8.8, 4.75, 8.35), (3.4, 8.8, 1.6, 4.75), (8.9, 12.7, 0.4, 6.5)],  # Q by head, over the
    # key; view and transpose; head 0; head 1; concatenated, times W_O
    "mask_pipeline": [(-0.3, 10.5, 8.78, 10.8), (-0.3, 10.5, 5.4, 8.72), (-0.3, 10.5, 0.0, 5.4)],  # padding mask
    # and the key; padding and causal combined; scores, masked, weights (and the padding query's row)
    "block_pre_post_ln": [[(-0.2, 10.3, 8.95, 9.9), (-0.2, 10.3, 0.0, 4.5)], (-0.2, 10.3, 4.5, 9.9)],  # both
    # blocks under their titles, lower half then upper half
    "encoder_decoder": [[(0.0, 10.4, 9.1, 9.5), (0.0, 10.4, 0.0, 5.2)], (0.0, 10.4, 4.6, 9.5)],
    "block_2017_vs_today": [[(0.1, 4.4, 0.57, 0.9), (6.2, 10.5, 0.57, 0.9), (0.1, 4.4, 0.26, 0.57),
                             (6.2, 10.5, 0.26, 0.57), (0.1, 9.0, 0.0, 0.26)],  # the key (the four changes), then
                            [(0.0, 5.75, 9.9, 10.8), (-0.1, 6.2, 0.95, 5.55)], (-0.1, 5.75, 5.55, 10.8),
                            [(5.75, 12.5, 9.9, 10.8), (6.2, 12.5, 0.95, 5.55)], (5.75, 12.7, 5.55, 10.8)],
    # each block bottom to top as the data flows, each half under the block's title
    "kv_cache": [[(0.0, 8.9, 2.75, 3.3), (0.0, 7.05, 3.45, 7.6)], (7.05, 11.0, 3.45, 6.2), (0.0, 11.0, 0.0, 2.75)],
    # the key over the query, keys, scores and weights; the values and the output; with and without a cache
    "induction_circuit": [(0.0, 11.0, 0.7, 6.3), (0.0, 11.0, 0.0, 0.7)],  # the circuit; why one layer is not enough
    "zero_stages": [[(0.0, 10.6, 3.2, 6.3), (0.0, 10.6, 0.0, 0.45)],  # with the key, each time; the devices'
                    [(0.0, 10.6, 5.72, 5.95), (0.0, 10.6, 0.45, 3.3), (0.0, 10.6, 0.0, 0.45)]],  # names over ZeRO-2, 3
}


def cut_through(fig, panel: tuple[float, float, float, float], slack: float = 0.03) -> list[str]:
    """The boxes and texts of a schematic (drawn, its axes in inches) that `panel` (x0, x1, y0, y1) cuts through:
    partly inside it and partly out, by more than `slack` inches, though they would fit in it. A frame (an unfilled
    box around a block, larger than a panel) may be cut, but not leave a stray line at the panel's edge."""
    from matplotlib.patches import FancyBboxPatch, Rectangle
    from matplotlib.text import Text

    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    x0, x1, y0, y1 = panel
    found = []
    for artist in ax.findobj(lambda a: isinstance(a, Rectangle | FancyBboxPatch | Text)):
        if artist is ax.patch or not artist.get_visible() or (isinstance(artist, Text) and not artist.get_text()):
            continue
        box = artist.get_window_extent(renderer).transformed(ax.transData.inverted())
        wide, tall = min(box.x1, x1) - max(box.x0, x0), min(box.y1, y1) - max(box.y0, y0)  # the part inside
        out = box.x0 < x0 - slack or box.x1 > x1 + slack or box.y0 < y0 - slack or box.y1 > y1 + slack
        if not isinstance(artist, Text) and artist.get_facecolor()[3] == 0:  # a frame around a block: its edge
            stray = out and 0 < min(wide, tall) < 0.2  # a line at the panel's edge
            if stray:
                found.append(f"a frame's edge at x {box.x0:.2f}-{box.x1:.2f}, y {box.y0:.2f}-{box.y1:.2f}")
            continue
        if box.width > x1 - x0 + slack or box.height > y1 - y0 + slack:
            continue
        sliver = slack if isinstance(artist, Text) else 0.005  # a box's edge shows even if just inside the panel
        if wide > sliver and tall > sliver and out:
            what = artist.get_text().strip() if isinstance(artist, Text) else type(artist).__name__
            found.append(f"{what!r} at x {box.x0:.2f}-{box.x1:.2f}, y {box.y0:.2f}-{box.y1:.2f}")
    return found


def rectangles(panel) -> list[tuple[float, float, float, float]]:
    """A panel's rectangles, top to bottom: one (x0, x1, y0, y1), or several shown one above the other."""
    return [panel] if isinstance(panel[0], int | float) else list(panel)


def schematic(name: str, path: Path) -> list[SlideFigure]:
    """The schematic `name` drawn again by tools/figures and saved for a slide: one figure per panel (PANELS), saved
    as `path` with the panel's number. A panel of several rectangles shows them one above the other at one scale
    (a key or the columns' titles above the part of the drawing they explain)."""
    found = []
    panels = PANELS.get(name, [None])
    for k, panel in enumerate(panels):
        target = path.with_name(f"{path.stem}-{k}.png") if len(panels) > 1 else path
        if panel is None:
            found.append(save(_draw_schematic(name), target))
            continue
        parts = rectangles(panel)
        wide, tall = max(x1 - x0 for x0, x1, _, _ in parts), sum(y1 - y0 for _, _, y0, y1 in parts)
        per_inch = min(BOX[0] / wide, BOX[1] / tall)
        saved = []
        for j, (x0, x1, y0, y1) in enumerate(parts):
            fig = _draw_schematic(name)
            fig.axes[0].set_xlim(x0, x1)
            fig.axes[0].set_ylim(y0, y1)
            fig.set_size_inches(x1 - x0, y1 - y0)
            box = ((x1 - x0) * per_inch, (y1 - y0) * per_inch)
            saved.append(save(fig, target.with_name(f"{target.stem}.part{j}.png") if len(parts) > 1 else target,
                              box=box, tight=False))
        found.append(saved[0] if len(parts) == 1 else _stacked(saved, target))
    return found


def _stacked(parts: list[SlideFigure], path: Path) -> SlideFigure:
    """Figures saved by `save` (in one folder) as one PNG at `path`, one above the other, centred; the parts go."""
    from PIL import Image

    images = [Image.open(path.with_name(part.file)) for part in parts]
    width = max(image.width for image in images)
    stacked = Image.new("RGB", (width, sum(image.height for image in images)), "white")
    top = 0
    for image in images:
        stacked.paste(image, ((width - image.width) // 2, top))
        top += image.height
        image.close()
    stacked.save(path, format="png")
    for part in parts:
        path.with_name(part.file).unlink()
    smallest = min(parts, key=lambda part: part.text_px)
    return SlideFigure(path.name, max(p.width for p in parts), sum(p.height for p in parts), smallest.text_px,
                       smallest.smallest, [o for p in parts for o in p.overlaps], [o for p in parts for o in p.outside])


def _draw_schematic(name: str):
    from tools.figures import __main__ as figures
    from tools.figures import style

    drawn = {}
    modules = [style] + [sys.modules[draw.__module__] for draw in figures.drawers()]
    originals = {module: module.save for module in modules}
    try:
        for module in modules:
            module.save = lambda fig, file_name: drawn.setdefault(Path(file_name).stem, fig)
        draw = next((d for d in figures.drawers() if d.__name__ == name), None)
        if draw is None:
            raise ValueError(f"no schematic drawn by a function named {name!r} in tools/figures")
        draw()
    finally:
        for module, original in originals.items():
            module.save = original
    return drawn[name]
