"""A chapter's slide figures drawn again: the schematics by tools/figures (slide_panels.py), the plots by running the
chapter's figure cells, and only the cells they depend on, in a kernel that saves each figure for a slide
(slide_figures.capture). `make slides` calls redraw_chapter once per chapter (tools/course/slides.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from tools import ROOT
from tools.book import exercises
from tools.course.needed_cells import SKIPPED, needed_cells
from tools.course.slide_figures import KERNEL_CAPTURE, KERNEL_SETUP, SlideFigure
from tools.course.slide_panels import schematic

SCHEMATIC = re.compile(r"tfm\.viz\.schematic\(\"(\w+)\"\)")


def figure_cells(nb) -> list[int]:
    """The slide-tagged code cells with a figure among their stored outputs."""
    slide = {"slide", "slide-output"}
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and slide & set(exercises.tags(cell))
            and any(k.startswith("image/") for out in cell.get("outputs", []) for k in out.get("data", {}))]


def redraw_chapter(chapter: Path, out: Path, timeout: int = 900) -> dict[int, list[SlideFigure]]:
    """Every slide figure of `chapter`, redrawn into `out` (see the module docstring): {cell index: its figures}."""
    from tools.book.notebooks import execute

    out = out.resolve()  # the kernel below runs in chapters/: a relative folder would point elsewhere there
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
        manifest = out / f"manifest-{prefix}.json"
        manifest.unlink(missing_ok=True)
        execute(run, chapter.parent, timeout)
        for key, figures in json.loads(manifest.read_text()).items():
            found[int(key.split("-")[1])] = [SlideFigure(**f) for f in figures]
    return dict(sorted(found.items()))
