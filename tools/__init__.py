"""The book's workshop, one folder per concern (each opens with a docstring that says what it holds and which `make`
targets use it). Run a tool from the repository's root as a module: `python -m tools.book.execute_notebooks ...`.

- book/     executing and checking the notebooks: the book's environment and budgets, `make execute`, the Colab-style
            pass and the student-edition pass of `make test`, the robustness sweep, the exercise structure, the
            mutation check
- course/   the course kit: nbgrader assignments and grading (with its guard), slides, the PDF edition, the npm copies
            of JavaScript that they and the website serve (with the website's Sphinx extension), and the offline
            browser they and the browser tests use
- figures/  the schematic figures, drawn from code (`make figures`)
- corpus/   the snapshot of the English corpus that ships with tfm

Imports only point from course/ to book/ and figures/ (the slides draw the schematics again at slide size) and
inside a folder (tests/test_tools_layout.py checks that no circle forms); what book/ and figures/ share lives here
(`drawn_text_points`: the font sizes of what a figure really draws, for the legibility checks of both).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository


def drawn_text_points(draw):
    """Call ``draw()`` (which draws a matplotlib figure) and return what it returns, with the font sizes in points of
    the non-empty texts it drew. Only what is really drawn counts: a tick label of an axis turned off, or a text set
    invisible, does not."""
    from matplotlib.text import Text

    sizes: list[float] = []
    original = Text.draw

    def recording_draw(text, renderer):
        if text.get_visible() and text.get_text().strip():
            sizes.append(text.get_fontsize())
        return original(text, renderer)

    Text.draw = recording_draw
    try:
        result = draw()
    finally:
        Text.draw = original
    return result, sizes
