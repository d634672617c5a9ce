"""Nothing the page cuts: every line of code within 79 characters and every printed line within 76, in every chapter
and Markdown page (tools/book/page_width.py, run by `make lint`; tests/test_browser.py measures the built pages)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import tfm
from tools.book import page_width

ROOT = Path(__file__).resolve().parents[1]


def test_the_book_fits_the_page():
    found = page_width.long_lines(page_width.book_pages())
    assert not found, "lines wider than the page:\n" + "\n".join(map(str, found[:20]))


def test_the_page_widths_agree():
    assert tfm.check.PAGE_WIDTH == page_width.OUTPUT_WIDTH
    config = (ROOT / "chapters" / "ruff.toml").read_text(encoding="utf-8")
    assert f"line-length = {page_width.CODE_WIDTH}" in config


def _chapter(folder: Path, code: str, output: str = "ok\n") -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(code, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    nb.cells = [nbformat.v4.new_markdown_cell("# 99. A chapter"), cell]
    path = folder / "99_chapter.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def chapters(tmp_path) -> Path:
    """A copy of the chapters' lint configuration (chapters/ruff.toml extends the project's pyproject.toml)."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "chapters").mkdir()
    shutil.copy(ROOT / "chapters" / "ruff.toml", tmp_path / "chapters" / "ruff.toml")
    return tmp_path / "chapters"


def test_a_100_character_line_in_a_chapter_is_rejected_with_its_cell_named(chapters):
    long = "x = " + repr("a" * 94)
    assert len(long) == 100
    path = _chapter(chapters, f"import math\n\n{long}\nprint(math.pi, x)")
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--output-format", "concise", str(chapters)],
                            capture_output=True, text=True, cwd=chapters.parent)
    assert result.returncode == 1 and "99_chapter.ipynb:cell 2:3:80: E501" in result.stdout, result.stdout
    found = page_width.notebook_long_lines(path)
    assert [(f.where, f.line, f.length) for f in found] == [("99_chapter.ipynb, cell 2 (code)", 3, 100)]
    fitted = _chapter(chapters, "x = (" + repr("a" * 40) + "\n     " + repr("a" * 54) + ")\nprint(x)")
    assert not page_width.notebook_long_lines(fitted)
    result = subprocess.run([str(ruff), "check", str(chapters)], capture_output=True, text=True, cwd=chapters.parent)
    assert result.returncode == 0, result.stdout


def test_a_printed_line_wider_than_the_page_is_rejected(chapters):
    path = _chapter(chapters, "print('-' * 77)", output="-" * 77 + "\n")
    assert [(f.where, f.length, f.limit) for f in page_width.notebook_long_lines(path)] == [
        ("99_chapter.ipynb, cell 2 (output)", 77, 76)]
    assert page_width.main([str(path)]) == 1
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][1]["metadata"]["tags"] = ["remove-output"]  # no page shows it
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert not page_width.notebook_long_lines(path)


def test_a_long_line_of_a_markdown_code_block_is_rejected(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n```bash\nmake test  # " + "x" * 80 + "\n```\n\n```{note}\n" + "y" * 120 + "\n```\n",
                    encoding="utf-8")
    found = page_width.markdown_long_lines(page)
    assert [(f.line, f.length) for f in found] == [(4, 93)]  # the directive's text is prose, and wraps


def test_prose_after_a_directive_is_not_taken_for_code():
    markdown = ("```{admonition} A title\n" + "p" * 100 + "\n```\n\n" + "q" * 100 + "\n\n"
                "```{note}\n```python\n" + "r" * 90 + "\n```\n```\n" + "s" * 100 + "\n")
    assert page_width.fenced_code(markdown) == [(9, "r" * 90)]  # a code block inside a directive is code
