"""The decks' figures, redrawn at slide size so that their text can be read from the back of a room.

A notebook's figure is drawn for a page: 7 to 13 inches wide with 8 to 10 pt text, which a slide shrinks to 10-14
px. `make slides` therefore draws each slide's figure again, from the chapter's code, and before saving it

- works out the size it will be shown at: the largest that fits BOX (CSS px of a 1280 x 720 slide, under the
  slide's title), keeping its proportions;
- raises every text (titles, labels, tick labels, legends, annotations) that would come out below TEXT_PX at that
  size to TEXT_PX, and lays the figure out again;
- saves it as a PNG at twice that size (sharp on a projector), with its size and its smallest text in CSS px, and
  the texts that now overlap one another or leave the figure, so that a figure that does not survive the
  enlarging is reported, not shown broken.

The chapter's code is run as grading runs it: only the figure cells and the cells they depend on
(tools/course/needed_cells.py), in a kernel with matplotlib's non-interactive backend, so that every figure a cell
makes is still open after it. The schematics (`tfm.viz.schematic`) are drawn again by tools/figures with the same
treatment. The browser test of the decks measures the result (tests/test_slides.py).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from tools import ROOT
from tools.book import exercises
from tools.course.needed_cells import SKIPPED, needed_cells

SLIDE = (1280, 720)  # a slide, in CSS px
MARGIN = 0.02  # reveal.js's margin around a slide: at a 1280 x 720 screen, a CSS px is 0.98 screen px
MIN_TEXT_PX = 18  # the smallest text on screen at 1280 x 720 that the test accepts
TEXT_PX = 19.0  # what a figure's smallest text is raised to, in CSS px (18.6 screen px)
BOX = (1200, 600)  # where a figure goes: the slide under its title
SCHEMATIC = re.compile(r"tfm\.viz\.schematic\(\"(\w+)\"\)")


@dataclass
class SlideFigure:
    file: str  # the PNG's name, in the deck's fig/ folder
    width: int  # the size it is shown at, in CSS px
    height: int
    text_px: float  # its smallest text at that size, in CSS px
    overlaps: list[str] = field(default_factory=list)  # pairs of texts that overlap, as "a | b"
    outside: list[str] = field(default_factory=list)  # texts that reach out of the figure

    @property
    def problems(self) -> list[str]:
        return [f"overlap: {o}" for o in self.overlaps] + [f"outside: {o}" for o in self.outside]


def _texts(fig, in_view: bool = False):
    """The figure's visible texts; with `in_view`, those of a drawn figure that reach into its frame (a schematic's
    panel leaves the rest of the schematic out of view)."""
    from matplotlib.text import Text

    ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks() for label in (tick.label1, tick.label2)}
    drawn = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis._update_ticks() for label in (tick.label1, tick.label2)}  # ticks in the axis's view
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.get_figure() is fig
             and (id(t) not in ticks or id(t) in drawn)]
    if not in_view:
        return texts
    renderer, frame = fig.canvas.get_renderer(), fig.bbox
    return [t for t in texts if (e := t.get_window_extent(renderer)).width > 0 and e.height > 0
            and e.x1 > frame.x0 and e.x0 < frame.x1 and e.y1 > frame.y0 and e.y0 < frame.y1]


def fit(fig, box: tuple[int, int] = BOX, text_px: float = TEXT_PX, enlarge: bool = True) -> tuple[float, float]:
    """Raise `fig`'s small texts for slide display (module docstring; not if `enlarge` is false) and lay it out
    again. Returns the figure's shown size in CSS px per inch and its smallest text's size in CSS px."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # drawn with Agg, whatever backend made it (the schematics' is SVG)
    width, height = fig.get_size_inches()
    per_inch = min(box[0] / width, box[1] / height)  # CSS px per inch of the figure, as shown
    least = text_px * 72 / per_inch if enlarge else 0.0  # the font size, in points, that is text_px when shown
    fig.canvas.draw()  # ticks and their labels exist after a draw
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for which, ticks in (("major", axis.get_major_ticks()), ("minor", axis.get_minor_ticks())):
                sizes = [t.label1.get_fontsize() for t in ticks if t.label1.get_text()]
                if sizes and min(sizes) < least:
                    ax.tick_params(axis=name, which=which, labelsize=least)
    for text in _texts(fig):
        if text.get_fontsize() < least:
            text.set_fontsize(least)
    fig.canvas.draw()
    renderer, frame = fig.canvas.get_renderer(), fig.bbox
    for text in _texts(fig, in_view=True):  # a long title, now wider than its figure: on two lines
        extent = text.get_window_extent(renderer)
        if extent.x0 < frame.x0 or extent.x1 > frame.x1:
            text.set_wrap(True)
    if fig.get_layout_engine() is None and any(ax.get_subplotspec() for ax in fig.axes):
        fig.set_layout_engine("tight")  # plots made without a layout; a schematic's one axes spans its figure
    fig.canvas.draw()
    fig.canvas.draw()  # constrained layout settles on the second draw
    smallest = min((t.get_fontsize() for t in _texts(fig, in_view=True)), default=least)
    return per_inch, smallest * per_inch / 72


def problems(fig, slack: float = 1.0) -> tuple[list[str], list[str]]:
    """The texts of a drawn figure that overlap another (by more than `slack` px each way) and those that reach out
    of the figure, each named by its text."""
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    boxes = []
    for text in _texts(fig, in_view=True):
        extent = text.get_window_extent(renderer)
        if extent.width > 0 and extent.height > 0:
            boxes.append((text.get_text().strip(), extent))
    outside = [name for name, b in boxes if b.x0 < frame.x0 - slack or b.y0 < frame.y0 - slack
               or b.x1 > frame.x1 + slack or b.y1 > frame.y1 + slack]
    overlaps = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            tall = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if wide > slack and tall > slack:
                overlaps.append(f"{a} | {b}")
    return overlaps, outside


def save(fig, path: Path, box: tuple[int, int] = BOX) -> SlideFigure:
    """`fig` fitted for a slide and saved as a PNG at `path` (at twice its shown size); closes it. A figure whose
    enlarged texts overlap or leave it is saved as drawn instead (only scaled to the box), with its problems, so
    that the deck shows it whole and `make slides` reports it."""
    import matplotlib.pyplot as plt

    fig.canvas.draw()
    sizes = [(text, text.get_fontsize()) for text in _texts(fig)]
    ticks = [(ax, name, axis.get_major_ticks()[0].label1.get_fontsize())
             for ax in fig.axes for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)) if axis.get_major_ticks()]
    engine = fig.get_layout_engine()
    per_inch, smallest = fit(fig, box)
    overlaps, outside = problems(fig)
    if overlaps or outside:  # undone: the figure as drawn, scaled to the box
        for text, size in sizes:
            text.set_fontsize(size)
        for ax, name, size in ticks:
            ax.tick_params(axis=name, labelsize=size)
        fig.set_layout_engine(engine if engine is not None else "none")
        per_inch, smallest = fit(fig, box, enlarge=False)
    width, height = fig.get_size_inches()
    fig.savefig(path, format="png", dpi=2 * per_inch, metadata={"Software": None})
    plt.close(fig)
    return SlideFigure(path.name, round(width * per_inch), round(height * per_inch), round(float(smallest), 2),
                       overlaps, outside)


# The cell injected before a chapter's own: figures are kept open (no inline backend) and saved after each figure
# cell by `capture(index)`, which writes the manifest the deck builder reads.
KERNEL_SETUP = """\
import sys
sys.path.insert(0, {root!r})
import matplotlib
matplotlib.use("agg")
import warnings
warnings.filterwarnings("ignore", message=".*non-interactive.*")
from tools.course import slide_figures as _slide_figures
"""
KERNEL_CAPTURE = "_slide_figures.capture({index}, {out!r}, {prefix!r})"


def capture(index: int, out: str, prefix: str) -> None:
    """In the kernel: save every open figure (the ones cell `index` drew) for a slide, and add them to the manifest
    `out/manifest.json` under `prefix-index`."""
    import matplotlib.pyplot as plt

    folder = Path(out)
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    figures = []
    for k, number in enumerate(plt.get_fignums()):
        figures.append(asdict(save(plt.figure(number), folder / f"{prefix}-{index:02d}-{k}.png")))
    manifest[f"{prefix}-{index}"] = figures
    manifest_path.write_text(json.dumps(manifest, indent=1))


# A schematic drawn for a book page is too tall (or too wide) for its text to be readable on a slide whole: it is
# shown in panels, slide after slide, each a rectangle (x0, x1, y0, y1) of it in inches (its drawing units), cut
# where nothing is cut through (the panels may share a row, to keep the thread).
PANELS = {
    "qkv_flow": [(0.0, 7.5, 4.2, 9.1), (0.0, 7.5, 0.0, 4.9)],
}


def schematic(name: str, path: Path) -> list[SlideFigure]:
    """The schematic `name` drawn again by tools/figures and saved for a slide: one figure per panel (PANELS), saved
    as `path` with the panel's number."""
    found = []
    panels = PANELS.get(name, [None])
    for k, panel in enumerate(panels):
        fig = _draw_schematic(name)
        if panel is not None:
            x0, x1, y0, y1 = panel
            fig.axes[0].set_xlim(x0, x1)
            fig.axes[0].set_ylim(y0, y1)
            fig.set_size_inches(x1 - x0, y1 - y0)
        found.append(save(fig, path.with_name(f"{path.stem}-{k}.png") if len(panels) > 1 else path))
    return found


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


def figure_cells(nb) -> list[int]:
    """The slide-tagged code cells with a figure among their stored outputs."""
    slide = {"slide", "slide-output"}
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and slide & set(exercises.tags(cell))
            and any(k.startswith("image/") for out in cell.get("outputs", []) for k in out.get("data", {}))]


def redraw_chapter(chapter: Path, out: Path, timeout: int = 900) -> dict[int, list[SlideFigure]]:
    """Every slide figure of `chapter`, redrawn into `out` (see the module docstring): {cell index: its figures}."""
    from tools.book.notebooks import execute

    out.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(chapter, as_version=4)
    prefix = chapter.name[:2]
    wanted = figure_cells(nb)
    found: dict[int, list[SlideFigure]] = {}
    plotted = []
    for i in wanted:
        match = SCHEMATIC.search(nb.cells[i].source)
        if match:
            found[i] = schematic(match.group(1), out / f"{prefix}-{i:02d}.png")
        else:
            plotted.append(i)
    if plotted:
        code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
        # the figure cells, the chapter's setup cell (seeds, the device) and what they depend on
        keep = needed_cells([nb.cells[i].source for i in code], {code.index(i) for i in plotted} | {0})
        cells = [nbformat.v4.new_code_cell(KERNEL_SETUP.format(root=str(ROOT)))]
        for position, i in enumerate(code):
            source = nb.cells[i].source if position in keep else SKIPPED
            cells.append(nbformat.v4.new_code_cell(source))
            if i in plotted:
                cells.append(nbformat.v4.new_code_cell(KERNEL_CAPTURE.format(index=i, out=str(out), prefix=prefix)))
            elif position in keep:
                cells.append(nbformat.v4.new_code_cell("import matplotlib.pyplot as _plt; _plt.close('all')"))
        run = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
        manifest = out / "manifest.json"
        manifest.unlink(missing_ok=True)
        execute(run, chapter.parent, timeout)
        for key, figures in json.loads(manifest.read_text()).items():
            found[int(key.split("-")[1])] = [SlideFigure(**f) for f in figures]
    return dict(sorted(found.items()))
