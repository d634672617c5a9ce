"""The decks' figures, redrawn at slide size so that their text can be read from the back of a room.

A notebook's figure is drawn for a page: 7 to 13 inches wide with 8 to 10 pt text, which a slide shrinks to 10-14
px. `make slides` therefore draws each slide's figure again, from the chapter's code, and before saving it

- works out the size it will be shown at: the largest that fits BOX (CSS px of a 1280 x 720 slide, under the
  slide's title), keeping its proportions;
- raises every text (titles, labels, tick labels, legends, annotations) that would come out below TEXT_PX at that
  size to TEXT_PX, and lays the figure out again; a plot's legend that its larger entries make cover the plot's
  lines is moved off them (where it covers least, else under the plot);
- saves it as a PNG at twice that size (sharp on a projector), with its size and its smallest text in CSS px, and
  the texts that now overlap one another, leave the box they label, cross the frame of the plot they are written
  in, or leave the figure, so that a figure that does not survive the enlarging is enlarged less or reported, not
  shown broken.

The chapter's code is run as grading runs it: only the figure cells and the cells they depend on
(tools/course/needed_cells.py), in a kernel with matplotlib's non-interactive backend, so that every figure a cell
makes is still open after it. The schematics (`tfm.viz.schematic`) are drawn again by tools/figures with the same
treatment, in panels where they are too large (slide_panels.py). The browser test of the decks measures the result
(tests/test_slides.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

SLIDE = (1280, 720)  # a slide, in CSS px
MARGIN = 0.02  # reveal.js's margin around a slide: at a 1280 x 720 screen, a CSS px is 0.98 screen px
MIN_TEXT_PX = 18  # the smallest text on screen at 1280 x 720 that the test accepts
TEXT_PX = 19.0  # what a figure's smallest text is raised to, in CSS px (18.6 screen px)
SMALLER_TEXT_PX = (16.0, 14.0, 12.0)  # tried in turn where TEXT_PX makes texts collide: larger than as drawn
BOX = (1200, 600)  # where a figure goes: the slide under its title


@dataclass
class SlideFigure:
    file: str  # the PNG's name, in the deck's fig/ folder
    width: int  # the size it is shown at, in CSS px
    height: int
    text_px: float  # its smallest text at that size, in CSS px
    smallest: str = ""  # that text
    overlaps: list[str] = field(default_factory=list)  # pairs of texts that overlap, as "a | b"
    outside: list[str] = field(default_factory=list)  # texts that reach out of the figure

    @property
    def problems(self) -> list[str]:
        return [f"overlap: {o}" for o in self.overlaps] + [f"outside: {o}" for o in self.outside]


def _texts(fig, region=None):
    """The figure's visible texts; with `region` (a drawn figure's shown part, display px), those that reach into it
    (a schematic's panel leaves the rest of the schematic out of view)."""
    from matplotlib.text import Text

    ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks() for label in (tick.label1, tick.label2)}
    drawn = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis._update_ticks() for label in (tick.label1, tick.label2)}  # ticks in the axis's view
    hidden = {id(t) for ax in fig.axes if not ax.get_visible() for t in ax.findobj(Text)}  # a row not shown
    hidden |= {id(t) for ax in fig.axes if not ax.axison for axis in (ax.xaxis, ax.yaxis)
               for t in axis.findobj(Text)}  # an axes drawn with axis("off") shows no ticks nor axis labels
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.get_figure() is fig
             and (id(t) not in ticks or id(t) in drawn) and id(t) not in hidden]
    if region is None:
        return texts
    renderer = fig.canvas.get_renderer()
    return [t for t in texts if (e := t.get_window_extent(renderer)).width > 0 and e.height > 0
            and e.x1 > region.x0 and e.x0 < region.x1 and e.y1 > region.y0 and e.y0 < region.y1]


def _region(fig, tight: bool):
    """The part of a drawn figure that is shown, in display px: all that is drawn (`tight`, as Jupyter shows a
    figure), or the figure's frame (a schematic, or a panel of one)."""
    if not tight:
        return fig.bbox
    return fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.08).transformed(fig.dpi_scale_trans)  # 0.08 in


def _enlarge(fig, least: float) -> None:
    """Every text of `fig` below `least` points raised to it: tick labels (through their axis, so that ticks made
    at the next draw follow), then titles, labels, legends and annotations."""
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


def _legends_below(fig) -> bool:
    """A figure's own legend put under its plots (at "lower center", as a notebook puts one under a grid), moved down
    to clear their enlarged tick labels and axis labels, which no layout engine makes room for, and set in fewer
    columns if its enlarged entries make it wider than the plots; True if one changed."""
    renderer = fig.canvas.get_renderer()
    plots = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
    moved = False
    for legend in list(fig.legends):
        if not plots or not (legend._loc == 8 or getattr(legend, "_below_plots", False)):  # 8: lower center
            continue
        lowest = min(box.y0 for box in plots)  # display px
        wide = max(box.x1 for box in plots) - min(box.x0 for box in plots)
        if legend.get_window_extent(renderer).width > wide and legend._ncols > 1:  # enlarged: one column fewer
            # (a legend lays its entries out once, when made: made again)
            fig.legends.remove(legend)
            legend = fig.legend(legend.legend_handles, [t.get_text() for t in legend.texts], loc="upper center",
                                ncols=legend._ncols - 1, fontsize=legend.texts[0].get_fontsize(),
                                frameon=legend.get_frame_on())  # placed under the plots below
            legend._below_plots = True
            fig.canvas.draw()
            moved = True
        if legend.get_window_extent(renderer).y1 > lowest:
            y = fig.transFigure.inverted().transform((0, lowest))[1]
            legend.set_loc("upper center")
            legend._below_plots = True
            legend.set_bbox_to_anchor((0.5, y), transform=fig.transFigure)
            moved = True
    return moved


def _covered(legend, renderer) -> int:
    """How many of its plot's lines, markers and bands a legend of a plot covers (drawn)."""
    from matplotlib.collections import PathCollection, PolyCollection

    ax = legend.axes
    box = legend.get_window_extent(renderer)
    found = 0
    for line in ax.get_lines():
        if not line.get_visible():
            continue
        path = line.get_transform().transform_path(line.get_path())
        if len(path.vertices) == 0:
            continue
        if line.get_linestyle() not in ("None", "none", "", " ") and path.intersects_bbox(box, filled=False):
            found += 1
        elif line.get_marker() not in (None, "None", "none", "", " "):
            found += int(box.count_contains(path.vertices))
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):  # a scatter's markers
            offsets = collection.get_offset_transform().transform(collection.get_offsets())
            found += int(box.count_contains(offsets)) if len(offsets) else 0
        elif isinstance(collection, PolyCollection):  # a band
            transform = collection.get_transform()
            found += sum(1 for path in collection.get_paths()
                         if transform.transform_path(path).intersects_bbox(box, filled=True))
    return found


def _legends_clear(fig) -> bool:
    """A plot's own legend that its enlarged entries make cover the plot's lines, markers or bands: placed where it
    covers least (loc "best"), else, if no plot is below it, under the plot, below its x axis, the figure made taller
    by as much (if a layout engine places its plots) so that the plots keep their size; True if one moved."""
    from matplotlib.transforms import offset_copy

    renderer = fig.canvas.get_renderer()
    moved = False
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible() or not ax.get_visible():
            continue
        under = getattr(legend, "_under_plot", None)  # how far under the plot it was put (points), if it was
        if under is None and not _covered(legend, renderer):
            continue
        if under is None and legend._loc != 0:  # 0: "best", chosen when drawn
            legend.set_loc("best")
            fig.canvas.draw()
            moved = True
            if not _covered(legend, renderer):
                continue
        spec = ax.get_subplotspec()
        if spec is not None and spec.rowspan.stop < spec.get_gridspec().nrows:  # a plot below it: left where it
            continue  # covers least
        axis = ax.xaxis.get_tightbbox(renderer)
        drop = (ax.bbox.y0 - min(ax.bbox.y0, axis.y0 if axis is not None else ax.bbox.y0)) * 72 / fig.dpi + 4
        if under is not None and abs(drop - under) < 0.5:
            continue
        legend.set_loc("upper center")
        legend.set_bbox_to_anchor((0.5, 0.0), transform=offset_copy(ax.transAxes, fig, y=-drop, units="points"))
        legend._under_plot = drop
        engine = fig.get_layout_engine()
        if under is None and engine is not None and type(engine).__name__ != "PlaceHolderLayoutEngine":
            width, height = fig.get_size_inches()
            fig.set_size_inches(width, height + legend.get_window_extent(renderer).height / fig.dpi + drop / 72)
        fig.canvas.draw()
        moved = True
    return moved


def fit(fig, box: tuple[int, int] = BOX, text_px: float = TEXT_PX, enlarge: bool = True, tight: bool = True):
    """Raise `fig`'s small texts for slide display (module docstring; not if `enlarge` is false) and lay it out
    again. Returns the shown part (inches), the CSS px per inch it is shown at, its smallest text's size in CSS px
    and that text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # drawn with Agg, whatever backend made it (the schematics' is SVG)
    engine = fig.get_layout_engine()  # fig.tight_layout() leaves a placeholder: laid out once, for the page's text
    if (engine is None or type(engine).__name__ == "PlaceHolderLayoutEngine") and any(
            ax.get_subplotspec() for ax in fig.axes):
        # plots made without a layout (a schematic's one axes spans its figure): constrained, which makes room for a
        # figure's title and legend, unless it holds a colour bar or axes placed by hand, then tight
        placed = any(ax.get_subplotspec() is None or ax.get_label() == "<colorbar>" for ax in fig.axes)
        fig.set_layout_engine("tight" if placed else "constrained")
    fig.canvas.draw()
    target = text_px
    for _ in range(3):  # enlarged text makes a tight figure larger, and so shown smaller: aim again
        region = _region(fig, tight)
        per_inch = min(box[0] * fig.dpi / region.width, box[1] * fig.dpi / region.height)  # CSS px per inch shown
        if not enlarge:
            break
        _enlarge(fig, target * 72 / per_inch)
        if not tight:  # a long title, now wider than its frame: on two lines (not math, which would break as text)
            fig.canvas.draw()
            frame, renderer = fig.bbox, fig.canvas.get_renderer()
            for text in _texts(fig, frame):
                extent = text.get_window_extent(renderer)
                if (extent.x0 < frame.x0 or extent.x1 > frame.x1) and "$" not in text.get_text():
                    text.set_wrap(True)
        fig.canvas.draw()
        fig.canvas.draw()  # a layout settles on the second draw
        if _legends_clear(fig):
            fig.canvas.draw()
        if _legends_below(fig):
            fig.canvas.draw()
        region = _region(fig, tight)
        per_inch = min(box[0] * fig.dpi / region.width, box[1] * fig.dpi / region.height)
        size = min((t.get_fontsize() for t in _texts(fig, region)), default=target) * per_inch / 72
        if size >= text_px - 0.01:
            break
        target *= text_px / size
    size, smallest = min(((t.get_fontsize(), t.get_text().strip()) for t in _texts(fig, region)), default=(0.0, ""))
    return region.transformed(fig.dpi_scale_trans.inverted()), per_inch, size * per_inch / 72, smallest


def _its_box(text, renderer):
    """The box (a rectangle of the text's axes) that `text` is the label of, the smallest that holds its anchor, and
    whether the text is centred in it (across, down); None and (False, False) if none."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    ax = text.axes
    if ax is None or (text.get_horizontalalignment() != "center"
                      and text.get_verticalalignment() not in ("center", "center_baseline")):
        return None, (False, False)
    x, y = text.get_transform().transform(text.get_unitless_position())
    found, centred, least = None, (False, False), None
    for patch in ax.patches:
        if not isinstance(patch, Rectangle | FancyBboxPatch) or not patch.get_visible():
            continue
        box = patch.get_window_extent(renderer)
        if not (box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1) or (least is not None and box.width * box.height
                                                                    >= least):
            continue
        across = text.get_horizontalalignment() == "center" and abs(x - (box.x0 + box.x1) / 2) <= 0.05 * box.width
        down = (text.get_verticalalignment() in ("center", "center_baseline")
                and abs(y - (box.y0 + box.y1) / 2) <= 0.05 * box.height)
        found, centred, least = box, (across, down), box.width * box.height
    return found, centred


def colliding(fig, tight: bool = True, slack: float = 0.75) -> tuple[list[tuple], list]:
    """The pairs of texts of a drawn figure that overlap (by more than `slack` points each way), a text and the box
    it labels (the string "its box") where the text leaves it, a text written inside a plot and the plot's frame
    (the string "the plot's frame") where the text crosses it, and the texts that reach out of its shown part."""
    renderer = fig.canvas.get_renderer()
    slack = slack * fig.dpi / 72  # in display px
    frame = _region(fig, tight)
    boxes = [(text, text.get_window_extent(renderer)) for text in _texts(fig, frame)]
    outside = [t for t, b in boxes if b.x0 < frame.x0 - slack or b.y0 < frame.y0 - slack
               or b.x1 > frame.x1 + slack or b.y1 > frame.y1 + slack]
    pairs = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            tall = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if wide > slack and tall > slack:
                pairs.append((a, b))
    for text, box in boxes:
        its, (across, down) = _its_box(text, renderer)  # a label drawn in a box must stay in it
        if its is not None and ((across and (box.x0 < its.x0 - slack or box.x1 > its.x1 + slack))
                                or (down and (box.y0 < its.y0 - slack or box.y1 > its.y1 + slack))):
            pairs.append((text, "its box"))
        ax = text.axes
        if ax is not None and ax.axison and any(text is t for t in ax.texts):  # written in a plot: inside its frame
            x, y = text.get_transform().transform(text.get_unitless_position())
            plot = ax.bbox
            if (plot.x0 < x < plot.x1 and plot.y0 < y < plot.y1 and (
                    box.x0 < plot.x0 - slack or box.x1 > plot.x1 + slack or box.y0 < plot.y0 - slack
                    or box.y1 > plot.y1 + slack)):
                pairs.append((text, "the plot's frame"))
    return pairs, outside


def problems(fig, tight: bool = True) -> tuple[list[str], list[str]]:
    """colliding(), each text named by what it says."""
    pairs, outside = colliding(fig, tight)
    name = lambda text: text if isinstance(text, str) else text.get_text().strip()  # noqa: E731
    return [f"{name(a)} | {name(b)}" for a, b in pairs], [name(t) for t in outside]


def break_line(text: str) -> str | None:
    """`text` on two lines, broken at the space nearest its middle that is not inside math; None if it has none."""
    if "\n" in text:
        return None
    spaces = [i for i, c in enumerate(text) if c == " " and text[:i].count("$") % 2 == 0]
    if not spaces:
        return None
    at = min(spaces, key=lambda i: abs(i - len(text) / 2))
    return text[:at] + "\n" + text[at + 1:]


def _titles_and_labels(fig) -> set[int]:
    """The texts that may be set on two lines: the figure's and the axes' titles and the axis labels."""
    found = [fig._suptitle] if fig._suptitle is not None else []
    for ax in fig.axes:
        found += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
    return {id(text) for text in found}


def _unclash(fig, tight: bool) -> None:
    """Titles and axis labels that the enlarging made run into another text, set on two lines (the longer of each
    pair), while that helps."""
    breakable = _titles_and_labels(fig)
    for _ in range(3):
        pairs, _outside = colliding(fig, tight)
        broken = False
        for pair in pairs:
            candidates = sorted((t for t in pair if id(t) in breakable), key=lambda t: -len(t.get_text()))
            for text in candidates:
                two_lines = break_line(text.get_text())
                if two_lines is not None:
                    text.set_text(two_lines)
                    broken = True
                    break
        if not broken:
            return
        fig.canvas.draw()
        fig.canvas.draw()


def save(fig, path: Path, box: tuple[int, int] = BOX, tight: bool = True, close: bool = True) -> SlideFigure:
    """`fig` fitted for a slide and saved as a PNG at `path` (at twice its shown size); closes it (unless `close` is
    false). `tight`: all
    that is drawn is shown, as Jupyter shows a figure; otherwise the figure's frame (a schematic's panel). A figure
    whose enlarged texts overlap or leave it is enlarged less (SMALLER_TEXT_PX) or else saved as drawn (only scaled
    to the box), with its problems at TEXT_PX, so that the deck shows it whole and `make slides` reports it.
    Glyphs are not hinted: a hinted text is wider at the saving resolution than where it was measured (by 2%, enough
    to cut a long line at the figure's edge); unhinted, it is as wide at every resolution."""
    import matplotlib

    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        return _save(fig, path, box, tight, close)


def _save(fig, path: Path, box: tuple[int, int], tight: bool, close: bool) -> SlideFigure:
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    sizes = [(text, text.get_fontsize()) for text in _texts(fig)]
    ticks = [(ax, name, axis.get_major_ticks()[0].label1.get_fontsize())
             for ax in fig.axes for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)) if axis.get_major_ticks()]
    labels = [(text, text.get_text()) for text in _texts(fig)]
    legends = [(legend, legend._loc, legend._bbox_to_anchor) for legend in fig.legends]
    own = [(legend, legend._loc, legend._bbox_to_anchor) for ax in fig.axes if (legend := ax.get_legend())]
    engine = fig.get_layout_engine()
    inches = fig.get_size_inches().copy()

    def undo() -> None:  # the figure as drawn
        for text, size in sizes:
            text.set_fontsize(size)
            text.set_wrap(False)
        for text, label in labels:
            text.set_text(label)
        for ax, name, size in ticks:
            ax.tick_params(axis=name, labelsize=size)
        fig.legends[:] = [legend for legend, _, _ in legends]  # the figure's own, as they were
        for legend, loc, anchor in legends:
            legend._loc, legend._bbox_to_anchor, legend._below_plots = loc, anchor, False
        for legend, loc, anchor in own:
            legend._loc, legend._bbox_to_anchor, legend._under_plot = loc, anchor, None
        fig.set_size_inches(inches)
        fig.set_layout_engine(engine if engine is not None else "none")

    found = None
    for target in (TEXT_PX, *SMALLER_TEXT_PX):
        if target != TEXT_PX:
            undo()
        region, per_inch, text_px, smallest = fit(fig, box, text_px=target, tight=tight)
        if problems(fig, tight) != ([], []):  # a title or label on two lines, then fitted again
            _unclash(fig, tight)
            region, per_inch, text_px, smallest = fit(fig, box, text_px=target, tight=tight)
        overlaps, outside = problems(fig, tight)
        found = found or (overlaps, outside)
        if not overlaps and not outside:
            break
    else:  # undone: the figure as drawn, scaled to the box, with what enlarging it to TEXT_PX ran into
        undo()
        region, per_inch, text_px, smallest = fit(fig, box, enlarge=False, tight=tight)
        overlaps, outside = found
    fig.savefig(path, format="png", dpi=2 * per_inch, bbox_inches=region if tight else None, pad_inches=0,
                metadata={"Software": None})
    if close:
        plt.close(fig)
    return SlideFigure(path.name, round(region.width * per_inch), round(region.height * per_inch),
                       round(float(text_px), 2), smallest, overlaps, outside)


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


def rows(fig) -> list[list]:
    """The axes of a grid of plots, row by row (a colour bar goes with every row it serves, an inset with the row
    beside it); one row if not a grid."""
    gridded = [ax for ax in fig.axes if ax.get_subplotspec() is not None and not hasattr(ax, "_colorbar_info")]
    starts = sorted({ax.get_subplotspec().rowspan.start for ax in gridded})
    if len(starts) < 2:
        return [list(fig.axes)]
    found = {start: [ax for ax in gridded if ax.get_subplotspec().rowspan.start == start] for start in starts}
    for ax in fig.axes:
        if any(ax is a for a in gridded):
            continue
        parents = getattr(ax, "_colorbar_info", {}).get("parents", [])
        served = [s for s in starts if any(p is a for p in parents for a in found[s])]
        if not served:  # an inset, or a colour bar placed by hand: the row whose height holds its middle
            middle = (ax.get_position().y0 + ax.get_position().y1) / 2
            served = [min(starts, key=lambda s: min(abs(middle - (a.get_position().y0 + a.get_position().y1) / 2)
                                                    for a in found[s]))]
        for start in served:
            found[start].append(ax)
    return [found[start] for start in starts]


def _plots(row: list) -> list:
    """A row's plots (not its colour bars or insets), left to right."""
    found = [ax for ax in row if ax.get_subplotspec() is not None and not hasattr(ax, "_colorbar_info")]
    return sorted(found, key=lambda ax: ax.get_subplotspec().colspan.start)


def _alone(fig, grid: list[list], k: int, columns: list[int] | None = None):
    """Lay `fig` out as row `k` of its grid alone (or only the plots of that row in `columns`), as if drawn as a
    figure of its own: the rest hidden and out of the layout, the plots shown on a grid of one row (the same columns,
    or as many as are shown), the figure that part of its size (and an inch for what it holds above and below), tick
    labels and axis labels shown where a shared axis shows them on the bottom row or the left column only. Returns a
    function that puts back what the next part needs (its grid, what is shown, labels, the size)."""
    from matplotlib.gridspec import GridSpec

    size = fig.get_size_inches().copy()
    kept = [(ax, ax.get_subplotspec(), ax.get_visible(), ax.get_in_layout(), ax.get_xlabel(), ax.get_ylabel(),
             {k: v for k, v in ax.xaxis.get_tick_params().items() if k in ("labelbottom", "labelrotation")},
             {k: v for k, v in ax.yaxis.get_tick_params().items() if k == "labelleft"}) for ax in fig.axes]
    parents = {id(ax): list(ax._colorbar_info["parents"]) for ax in fig.axes if hasattr(ax, "_colorbar_info")}
    plots = [ax for ax in _plots(grid[k]) if columns is None or ax.get_subplotspec().colspan.start in columns]
    shown = {id(ax) for ax in plots}
    shown |= {id(ax) for ax in grid[k] if any(id(p) in shown for p in parents.get(id(ax), []))
              or (columns is None and ax.get_subplotspec() is None and id(ax) not in parents)}  # its colour bars
    bottom = {ax.get_subplotspec().colspan.start: ax for ax in _plots(grid[-1])}
    left = _plots(grid[k])[0]
    for ax in fig.axes:
        ax.set_visible(id(ax) in shown)
        ax.set_in_layout(id(ax) in shown)
        if id(ax) in parents:  # a colour bar: it serves the shown plots only
            ax._colorbar_info["parents"] = [p for p in parents[id(ax)] if id(p) in shown] or parents[id(ax)]
    gs = plots[0].get_subplotspec().get_gridspec()
    one = (GridSpec(1, gs.ncols, figure=fig, width_ratios=gs.get_width_ratios()) if columns is None
           else GridSpec(1, len(plots), figure=fig))
    for j, ax in enumerate(plots):
        spec = ax.get_subplotspec()
        ax.set_subplotspec(one[0, spec.colspan.start:spec.colspan.stop] if columns is None else one[0, j])
        below = bottom.get(spec.colspan.start)
        if len(ax.get_shared_x_axes().get_siblings(ax)) > 1 and below is not None:  # labelled on the bottom row only
            labels = below.get_xticklabels()
            ax.tick_params(axis="x", labelbottom=True, labelrotation=labels[0].get_rotation() if labels else 0)
        if not ax.get_xlabel() and below is not None and below.get_xlabel():
            ax.set_xlabel(below.get_xlabel(), fontsize=below.xaxis.label.get_fontsize())
        if j == 0 and ax is not left and len(ax.get_shared_y_axes().get_siblings(ax)) > 1:  # on the left column only
            ax.tick_params(axis="y", labelleft=True)
            if not ax.get_ylabel():
                ax.set_ylabel(left.get_ylabel(), fontsize=left.yaxis.label.get_fontsize())
    share = 1 if columns is None else len(plots) / gs.ncols
    fig.set_size_inches(size[0] * share, size[1] / len(grid) + 1.0)

    def back() -> None:
        for ax, spec, visible, in_layout, xlabel, ylabel, x_ticks, y_ticks in kept:
            ax.tick_params(axis="x", **x_ticks)
            ax.tick_params(axis="y", **y_ticks)
            if spec is not None:
                ax.set_subplotspec(spec)
            ax.set_visible(visible)
            ax.set_in_layout(in_layout)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
        for ax in fig.axes:
            if id(ax) in parents:
                ax._colorbar_info["parents"] = parents[id(ax)]
        fig.set_size_inches(size)
    return back


MAX_PARTS = 8  # at most this many slides for one figure


def save_figure(fig, path: Path) -> list[SlideFigure]:
    """A notebook's figure for slides: whole if its text can be made readable (save); otherwise, if it is a grid of
    plots, in parts, each laid out as a figure of its own (_alone) on a slide of its own: row by row, else each row
    in halves, thirds... down to one plot a slide (at most MAX_PARTS slides), the first split whose text is all
    readable, else the one without overlaps whose smallest text is largest, if larger than the whole's; else the
    whole figure, its small text reported."""
    import matplotlib.pyplot as plt

    whole = save(fig, path, close=False)
    grid = rows(fig)
    columns = max(len(_plots(row)) for row in grid)
    readable = lambda f: not f.problems and f.text_px * (1 - MARGIN) >= MIN_TEXT_PX  # noqa: E731
    if readable(whole) or (len(grid) < 2 and columns < 2) or not _plots(grid[0]):
        plt.close(fig)
        return [whole]
    best, best_px = [whole], whole.text_px + 1
    for per_slide in sorted({columns, *(-(-columns // n) for n in range(2, columns + 1))}, reverse=True):
        if len(grid) * -(-columns // per_slide) > MAX_PARTS or (per_slide == columns and len(grid) < 2):
            continue
        parts = []
        for k, row in enumerate(grid):
            starts = [ax.get_subplotspec().colspan.start for ax in _plots(row)]
            chunks = [None] if per_slide == columns else [starts[i:i + per_slide]
                                                          for i in range(0, len(starts), per_slide)]
            for chunk in chunks:
                back = _alone(fig, grid, k, chunk)
                name = f"{path.stem}-row{k}" + ("" if chunk is None else f"-{chunk[0]}")
                parts.append(save(fig, path.with_name(f"{name}.png"), close=False))
                back()
        if all(readable(p) for p in parts) or (not any(p.problems for p in parts)
                                               and min(p.text_px for p in parts) > best_px):
            for old in best:
                if old is not whole:
                    path.with_name(old.file).unlink()
            best, best_px = parts, min(p.text_px for p in parts)
            if all(readable(p) for p in parts):
                break
        else:
            for part in parts:
                path.with_name(part.file).unlink()
    plt.close(fig)
    if best != [whole]:
        path.unlink()
    return best


def capture(index: int, out: str, prefix: str) -> None:
    """In the kernel: save every open figure (the ones cell `index` drew) for a slide, and add them to the manifest
    `out/manifest-prefix.json` under `prefix-index`."""
    import matplotlib.pyplot as plt

    folder = Path(out)
    manifest_path = folder / f"manifest-{prefix}.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    figures = []
    for k, number in enumerate(plt.get_fignums()):
        figures += [asdict(f) for f in save_figure(plt.figure(number), folder / f"{prefix}-{index:02d}-{k}.png")]
    manifest[f"{prefix}-{index}"] = figures
    manifest_path.write_text(json.dumps(manifest, indent=1))
