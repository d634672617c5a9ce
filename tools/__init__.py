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
inside a folder (tests/test_tools_layout.py checks that no circle forms).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository
