"""Lines that the page would cut: code and printed output wider than the website's code column and the A4 page.

At a window width of 1280 px a code block of the website holds about 80 characters, and so does a line of code on
the PDF edition's A4 page. So, in every chapter and every Markdown page of the book:

- a line of a code cell (shown, or folded behind "Show code") holds at most CODE_WIDTH = 79 characters (ruff's
  line length for chapters/, chapters/ruff.toml, says the same for code);
- a line of a stored output that the page shows (printed text, a value, an error) holds at most OUTPUT_WIDTH = 76
  characters (`tfm.check.PAGE_WIDTH`);
- a line of a fenced code block in Markdown (a shell command, an example) holds at most CODE_WIDTH characters.

`make lint` runs it (``python -m tools.book.page_width``), before the site is built; each line too long is named by
notebook, cell (counted from 1 over all cells, as ruff counts them) and line. tests/test_browser.py measures the
built pages themselves: no code or output block is wider than its box at 1280 px.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT

CODE_WIDTH = 79
OUTPUT_WIDTH = 76  # tfm.check.PAGE_WIDTH (tests/test_project.py keeps the two equal)
HIDDEN = {"remove-cell", "remove-input"}  # cells whose code no page shows
NO_OUTPUT = {"remove-cell", "remove-output"}  # cells whose outputs no page shows
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")


@dataclass(frozen=True)
class LongLine:
    where: str  # "chapters/12_tokens.ipynb, cell 23 (output)"
    line: int  # 1-based, within the cell's source or output
    length: int
    limit: int
    text: str

    def __str__(self) -> str:
        return (f"{self.where}, line {self.line}: {self.length} characters (limit {self.limit}): "
                f"{self.text[:60]!r}{'...' if len(self.text) > 60 else ''}")


def output_text(output: dict) -> str:
    """The text a page shows for one stored output (nothing for an image, whose text/plain is not shown)."""
    if output["output_type"] == "stream":
        return "".join(output.get("text", ""))
    if output["output_type"] == "error":
        return ANSI.sub("", "\n".join(output.get("traceback", [])))
    data = output.get("data", {})
    if any(key.startswith("image/") or key == "text/html" for key in data):
        return ""
    return "".join(data.get("text/plain", ""))


def _too_long(text: str, limit: int, where: str) -> list[LongLine]:
    return [LongLine(where, n, len(line), limit, line) for n, line in enumerate(text.splitlines(), start=1)
            if len(line) > limit]


def fenced_code(markdown: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a fenced code block of ``markdown``, directives' fences aside."""
    found, fence, directives = [], None, []  # directives: the fences of the directives open around this line
    for number, line in enumerate(markdown.splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match and match.group(3).strip().startswith("{"):  # ```{admonition} is a directive, not code
                directives.append(match.group(2))
            elif match and directives and match.group(2).startswith(directives[-1]) and not match.group(3).strip():
                directives.pop()  # the directive's closing fence
            elif match:
                fence = match.group(2)
            continue
        if match and match.group(2).startswith(fence) and not match.group(3).strip():
            fence = None
            continue
        found.append((number, line))
    return found


def notebook_long_lines(path: Path) -> list[LongLine]:
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    found: list[LongLine] = []
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"], start=1):
        tags = set(cell.get("metadata", {}).get("tags", []))
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            found += [LongLine(f"{name}, cell {index} (Markdown code block)", n, len(line), CODE_WIDTH, line)
                      for n, line in fenced_code(source) if len(line) > CODE_WIDTH]
        if cell["cell_type"] != "code":
            continue
        if not tags & HIDDEN:
            found += _too_long(source, CODE_WIDTH, f"{name}, cell {index} (code)")
        if not tags & NO_OUTPUT:
            for output in cell.get("outputs", []):
                found += _too_long(output_text(output), OUTPUT_WIDTH, f"{name}, cell {index} (output)")
    return found


def markdown_long_lines(path: Path) -> list[LongLine]:
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    return [LongLine(f"{name} (code block)", n, len(line), CODE_WIDTH, line)
            for n, line in fenced_code(path.read_text(encoding="utf-8")) if len(line) > CODE_WIDTH]


def book_pages() -> list[Path]:
    """The chapters and the Markdown pages of the website."""
    return sorted((ROOT / "chapters").glob("*.ipynb")) + [ROOT / "intro.md"] + sorted(
        (ROOT / "appendices").glob("*.md"))


def long_lines(paths: list[Path]) -> list[LongLine]:
    found: list[LongLine] = []
    for path in paths:
        found += notebook_long_lines(path) if path.suffix == ".ipynb" else markdown_long_lines(path)
    return found


def main(argv: list[str]) -> int:
    paths = [Path(p).resolve() for p in argv] or book_pages()
    found = long_lines(paths)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} lines wider than the page (code {CODE_WIDTH}, output {OUTPUT_WIDTH} characters): wrap "
              "them (tools/book/page_width.py says why)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
