"""The PDF edition (tools/course/pdf.py, `make pdf`): the book in order, with its contents first, its math typeset
and bookmarks to navigate it.

Under `make test` the unit tests print a small book (chapter 2, whose first page holds an equation, and chapter 8,
whose attention views must draw before printing) from the stored outputs into a temporary folder; `make pdf-check`
(run by .ci/run) builds the whole PDF once and runs these tests on it (TFM_PDF=its path). Read back with poppler
(pdftotext, pdftoppm, pdfinfo). Skipped when chromium, npm, playwright or poppler is missing, unless
TFM_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
import yaml

from tools.course import pdf
from tools.course.browser import RAW_TEX

ROOT = Path(__file__).resolve().parents[1]

# The first display equation of chapter 2, on the page that starts the chapter.
CHAPTER_2_OPENING = "Chapter 1 computed attention one token at a time"


def _first_heading(text: str) -> str:
    line = next(line for line in text.splitlines() if line.startswith("# "))
    return line[2:].replace("`", "").strip()


SMALL_BOOK = ["chapters/02_attention_as_matrices", "chapters/08_inside_bert"]


def book_titles(parts: list[tuple[str, list[str]]]) -> list[str]:
    """Every chapter's and appendix's title of `parts` (as pdf.book_parts gives them), in order."""
    titles = []
    for _, files in parts:
        for file in files:
            path = ROOT / f"{file}.ipynb"
            if path.exists():
                cells = nbformat.read(path, as_version=4).cells
                titles.append(_first_heading(next(c.source for c in cells if c.cell_type == "markdown")))
            else:
                titles.append(_first_heading((ROOT / f"{file}.md").read_text(encoding="utf-8")))
    return titles


@pytest.fixture(scope="module")
def book_pdf(pdf_tools, tmp_path_factory) -> dict:
    whole = os.environ.get("TFM_PDF")
    if whole:  # make pdf-check: the whole book, built by make pdf just before
        out, parts = Path(whole), pdf.book_parts()
        summary = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))  # written by make pdf
        assert [tuple(part) for part in summary["parts"]] == [(c, f) for c, f in parts], "the PDF is not of this book"
    else:
        out = tmp_path_factory.mktemp("pdf") / "book.pdf"
        summary = pdf.build(out, files=SMALL_BOOK)
        parts = summary["parts"]
        assert [f for _, files in parts for f in files] == SMALL_BOOK
    pages = subprocess.run(["pdftotext", "-layout", str(out), "-"], capture_output=True, text=True,
                           check=True).stdout.split("\f")
    return {"path": out, "summary": summary, "pages": pages, "parts": parts, "titles": book_titles(parts)}


def _flat(text: str) -> str:
    """Whitespace collapsed, and the curly quotes that Sphinx prints for a notebook's straight ones made straight."""
    return " ".join(text.translate(str.maketrans("‘’“”", "''\"\"")).split())


def test_every_title_in_book_order(book_pdf):
    titles = book_pdf["titles"]
    assert len(titles) == sum(len(files) for _, files in book_pdf["parts"]) >= 2
    body = _flat(" ".join(book_pdf["pages"][2:]))  # after the contents
    position = 0
    for title in titles:
        found = body.find(_flat(title), position)
        assert found >= 0, f"{title!r} is missing from the PDF, or out of order"
        position = found + len(title)


def test_contents_come_first(book_pdf):
    contents = _flat(" ".join(book_pdf["pages"][:2]))
    assert "Contents" in contents
    for caption, _ in book_pdf["parts"]:
        assert caption in contents
    for title in book_pdf["titles"]:
        assert _flat(title) in contents, f"{title!r} is not in the table of contents"


def test_no_raw_tex_and_nothing_from_the_network(book_pdf):
    leaks = [(n + 1, m.group(0)) for n, page in enumerate(book_pdf["pages"]) for m in RAW_TEX.finditer(page)]
    assert not leaks, f"untypeset TeX (page, text): {leaks[:10]}"
    assert book_pdf["summary"]["aborted"] == []
    assert book_pdf["summary"]["errors"] == [], f"the printing browser reported {book_pdf['summary']['errors']}"
    assert book_pdf["summary"]["views_drawn"], "chapter 8's attention views had not drawn when the PDF was printed"


def test_math_page_renders(book_pdf, tmp_path):
    from PIL import Image

    number = next(n + 1 for n, page in enumerate(book_pdf["pages"]) if CHAPTER_2_OPENING in _flat(page))
    text = _flat(book_pdf["pages"][number - 1])
    # MathJax's CHTML output is text in its own fonts: the equation's letters come back as characters.
    assert "softmax" in text.replace(" ", "") and "√" in text, text[:800]
    subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", str(number), "-l", str(number), "-singlefile",
                    str(book_pdf["path"]), str(tmp_path / "page")], check=True)
    gray = Image.open(tmp_path / "page.png").convert("L")
    dark = sum(count for value, count in enumerate(gray.histogram()) if value < 128)
    assert dark > 0.01 * gray.width * gray.height, "the page of chapter 2's first equation renders blank"


def test_bookmarks(book_pdf):
    info = subprocess.run(["pdfinfo", str(book_pdf["path"])], capture_output=True, text=True, check=True).stdout
    assert re.search(r"Page size:\s+595", info), "not A4"
    outline = book_pdf["path"].read_bytes()
    assert b"/Outlines" in outline and b"/Count" in outline, "the PDF has no bookmarks"
    assert yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"] in book_pdf["pages"][0]


def test_contents_give_each_chapter_its_page(book_pdf):
    numbers = book_pdf["summary"]["pages"]
    assert len(numbers) == len(book_pdf["titles"]) and numbers == sorted(numbers) and numbers[0] > 1
    contents = book_pdf["pages"][:numbers[0] - 1]
    for title, number in zip(book_pdf["titles"], numbers, strict=True):
        start = _flat(book_pdf["pages"][number - 1])[:400]
        assert _flat(title)[:40] in start, f"{title!r} does not start page {number}"
        line = next(line for page in contents for line in page.splitlines() if _flat(title)[:30] in _flat(line))
        assert line.rstrip().endswith(f" {number}"), f"the contents give {title!r} no page {number}: {line!r}"


def test_student_edition_has_no_solutions(tmp_path):
    from tools.course.browser import copy_book

    book = copy_book(tmp_path / "book", SMALL_BOOK)
    before = nbformat.read(book / "chapters" / "02_attention_as_matrices.ipynb", as_version=4)
    pdf.to_student_edition(book)
    after = nbformat.read(book / "chapters" / "02_attention_as_matrices.ipynb", as_version=4)
    code = lambda nb: "\n".join(c.source for c in nb.cells if c.cell_type == "code")  # noqa: E731
    assert "_solution" in code(before) and "_solution" not in code(after)
    assert "solution-start" not in "\n".join(c.source for c in after.cells)
    assert any(c.get("outputs") for c in after.cells if c.cell_type == "code"), "the stored outputs were dropped"
    with pytest.raises(SystemExit, match="no edition"):
        pdf.build(tmp_path / "x.pdf", edition="teacher")


def test_student_edition_leaves_out_the_answer_key(tmp_path):
    """The rubrics (every pencil-and-paper answer), the instructor guide and the course kit are not in the student
    edition: not in its contents, not among its files, and no page left in it quotes a rubric's expected value."""
    from tools.course.browser import copy_book

    book = copy_book(tmp_path / "book", [*SMALL_BOOK, *pdf.INSTRUCTOR_ONLY, "appendices/syllabus"])
    answer = "2,362,368"  # chapter 3's pencil-and-paper parameter count, in the rubrics of the exercise guide
    assert answer in (book / "appendices" / "exercise_guide.md").read_text(encoding="utf-8")
    pdf.to_student_edition(book)
    kept = {entry["file"] for part in pdf.book_parts(book) for entry in [{"file": f} for f in part[1]]}
    assert kept == {*SMALL_BOOK, "appendices/syllabus"}, kept
    assert not any((book / f"{name}.md").exists() for name in pdf.INSTRUCTOR_ONLY)
    pages = [p.read_text(encoding="utf-8") for p in book.rglob("*.md")] + [
        p.read_text(encoding="utf-8") for p in (book / "chapters").glob("*.ipynb")]
    assert not any(answer in page for page in pages), "an expected answer is left in the student edition"


def test_the_course_kit_states_this_pdf_s_pages_and_size(book_pdf):
    if not os.environ.get("TFM_PDF"):
        pytest.skip("the whole book's PDF only (make pdf-check)")
    kit = (ROOT / "appendices" / "course_kit.md").read_text(encoding="utf-8")
    stated = re.search(r"about (\d+) pages\s+and\s+(\d+) MB", kit)
    assert stated, "the course kit should say how many pages and MB the PDF has ('about N pages and M MB')"
    info = subprocess.run(["pdfinfo", str(book_pdf["path"])], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, flags=re.MULTILINE).group(1))
    size = book_pdf["path"].stat().st_size / 1e6
    assert abs(pages - int(stated.group(1))) <= 0.05 * pages, f"the PDF has {pages} pages: update course_kit.md"
    assert abs(size - int(stated.group(2))) <= 0.1 * size, f"the PDF has {size:.0f} MB: update course_kit.md"
