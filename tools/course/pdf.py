"""The PDF edition: the whole book as one file, printed by headless Chromium from Jupyter Book's single-page build.

`make pdf` (or `python -m tools.course.pdf [out.pdf]`) writes build/pdf/transformer-token-by-token.pdf from the stored
outputs; nothing is re-executed.

Why a browser and not LaTeX: Jupyter Book's LaTeX route needs TeX Live from Debian (texlive-xetex with
texlive-latex-extra and fonts: about 75 packages, some 670 MB installed), every SVG figure converted to PDF by
another tool, and it drops what only a browser can draw (chapter 8's interactive attention views). The browser route
needs nothing that the browser test does not already install (Debian's chromium, Playwright, npm), and it prints the
book as readers see it on the website: the same MathJax with the same macros, the same figures and outputs.

How: copy the book files into a temporary folder, build it with `--builder singlehtml` (one HTML page, parts and
chapters numbered as on the website; like the website, it serves its own MathJax, d3 and jQuery: website.py), serve
it on 127.0.0.1, open it in an offline page (browser.py), wait until MathJax has typeset, the images have
loaded and chapter 8's views have drawn, add print CSS and a table of contents built from the page's own navigation,
and print to A4 with page numbers and PDF bookmarks. It prints twice: the first printing tells on which page each
chapter starts (read back with poppler's pdftotext), the second has those numbers in the contents.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import yaml

from tools import ROOT
from tools.book.student_edition import write_student_edition
from tools.course import browser, vendor

DEFAULT_OUT = ROOT / "build" / "pdf" / "transformer-token-by-token.pdf"

# Print styles: the website's chrome hidden (and the theme's own print contents, which lists the chapters without
# their parts: ours, from _toc.yml, replaces it), each part/chapter/appendix on a new page, long lines wrapped.
PRINT_CSS = """
@page { size: A4; margin: 16mm 14mm 18mm 14mm; }
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .header-article, .bd-header-article, .prev-next-area,
.bd-footer, .bd-footer-article, .bd-footer-content, .headerlink, .skip-link, #pst-back-to-top, .launch-buttons,
.dropdown-launch-buttons, .dropdown-download-buttons, .article-header-buttons, .toggle-secondary-sidebar,
.sidebar-toggle, .search-button, .theme-switch-button, .copybtn, .bd-search, .pst-scrollable-table-container + br,
#jb-print-docs-body, .tfm-pdf-hide { display: none !important; }
html, body { font-size: 10.5pt; background: white !important; }
.bd-container, .bd-container__inner, .bd-main, .bd-content, .bd-article-container, .bd-article, .bd-page-width {
  max-width: none !important; width: auto !important; padding: 0 !important; margin: 0 !important;
  display: block !important; overflow: visible !important; }
section.tfm-chapter { break-before: page; }
h2.tfm-part-heading { break-before: page; font-size: 24pt; margin-top: 30%; text-align: center; }
section.tfm-chapter > h3 { font-size: 20pt; }
h1 { break-after: avoid; }
h2, h3, h4 { break-after: avoid; }
pre, .highlight pre, .output pre, div.cell_output pre {
  white-space: pre-wrap !important; overflow-wrap: anywhere; word-break: break-word; overflow: visible !important;
  max-height: none !important; font-size: 8.5pt; }
div.cell_output, .output, .highlight, .cell_input { overflow: visible !important; max-height: none !important; }
div.cell_input, div.cell_output { break-inside: avoid; }  /* a short cell never splits; a long one still does */
img, svg, figure, .figure, video { max-width: 100% !important; height: auto; }
img, figure, .figure, .cell_output .output.image_png { break-inside: avoid; }
table { font-size: 9pt; }
mjx-container[display="true"] { overflow: visible !important; }
mjx-container[display="true"] > mjx-math { max-width: 100%; }
a { color: inherit; text-decoration: none; }
#tfm-pdf-toc { break-after: page; }
#tfm-pdf-toc h2 { font-size: 18pt; }
#tfm-pdf-toc ol { list-style: none; padding-left: 0; }
#tfm-pdf-toc li.tfm-part { font-weight: bold; margin-top: .8em; }
#tfm-pdf-toc li.tfm-part > ol { font-weight: normal; padding-left: 1.2em; }
#tfm-pdf-toc .tfm-title-page { font-size: 26pt; font-weight: bold; margin: 2em 0 .3em; }
#tfm-pdf-toc li.tfm-entry { display: flex; }
#tfm-pdf-toc li.tfm-entry .tfm-leader { flex: 1; border-bottom: 1px dotted #999; margin: 0 .4em .3em; }
/* A wide table breaks across pages, its header repeated, instead of leaving half a page blank before it. */
table, .pst-scrollable-table-container, .table-wrapper { break-inside: auto !important; overflow: visible !important; }
thead { display: table-header-group; }
tr { break-inside: avoid; }
"""

# The table of contents, from _toc.yml (the parts' captions and their files, which the website's navigation shows)
# and the chapters' own numbered titles on the page. Each part gets a heading of its own (a bookmark, a page) before
# its first chapter; each chapter's section is marked to start on a new page. Returns the titles, in order.
TOC_JS = """
([title, parts]) => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const toc = document.createElement('div');
  toc.id = 'tfm-pdf-toc';
  toc.innerHTML = '<div class="tfm-title-page"></div><h2>Contents</h2><ol></ol>';
  toc.querySelector('.tfm-title-page').textContent = title;
  const titles = [];
  for (const [caption, files] of parts) {
    const part = document.createElement('li');
    part.className = 'tfm-part';
    part.innerHTML = '<span></span><ol></ol>';
    part.querySelector('span').textContent = caption;
    toc.querySelector('ol').appendChild(part);
    files.forEach((file, i) => {
      const anchor = document.getElementById('document-' + file);
      const section = anchor && anchor.nextElementSibling;
      if (!section) return;
      const heading = section.querySelector('h1, h2, h3, h4');
      const item = document.createElement('li');
      item.className = 'tfm-entry';
      item.innerHTML = '<span class="tfm-title"></span><span class="tfm-leader"></span>'
        + '<span class="tfm-page">000</span>';
      item.querySelector('.tfm-title').textContent = heading.textContent.replace(/#$/, '').trim();
      titles.push(item.querySelector('.tfm-title').textContent);
      part.querySelector('ol').appendChild(item);
      section.classList.add('tfm-chapter');
      if (i === 0) {
        const partHeading = document.createElement('h2');
        partHeading.className = 'tfm-part-heading';
        partHeading.textContent = caption;
        anchor.before(partHeading);
      }
    });
  }
  // The intro's "The chapters" heading holds only the lists of chapters (one per part), which this contents replaces.
  const holder = document.querySelector('.toctree-wrapper')?.parentElement;
  const [heading, ...rest] = holder ? holder.children : [];
  if (holder && holder.matches('section') && rest.every(child => child.matches('.toctree-wrapper'))) heading.remove();
  article.prepend(toc);
  return titles;
}
"""

# Write the page numbers found in the first printing into the contents (the same number of digits as the "000"
# placeholders, so that no line of the contents moves).
PAGES_JS = """
(numbers) => {
  const cells = document.querySelectorAll('#tfm-pdf-toc .tfm-page');
  cells.forEach((cell, i) => { cell.textContent = String(numbers[i]); });
  return cells.length;
}
"""

FOOTER = ('<div style="font-size:8pt; width:100%; text-align:center; color:#555;">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


def book_parts(book: Path = ROOT) -> list[tuple[str, list[str]]]:
    """The parts of `book`'s _toc.yml: (caption, [file, ...]) in reading order."""
    toc = yaml.safe_load((book / "_toc.yml").read_text(encoding="utf-8"))
    return [(part["caption"], [entry["file"] for entry in part["chapters"]]) for part in toc["parts"]]


FOLDED = {"hide-input": "remove-input", "hide-output": "remove-output", "hide-cell": "remove-cell"}


def prepare(book: Path) -> None:
    """Ready the copy for the one-page build: its configuration, and folded cells (myst-nb's hide-* tags, which the
    singlehtml writer cannot write: "unknown node type: HideCodeCellNode") left out of the print as a reader of the
    website who never unfolds them sees the page."""
    for chapter in sorted((book / "chapters").glob("*.ipynb")):
        nb = nbformat.read(chapter, as_version=4)
        for cell in nb.cells:
            tags = cell.get("metadata", {}).get("tags", [])
            if any(tag in FOLDED for tag in tags):
                cell.metadata["tags"] = [FOLDED.get(tag, tag) for tag in tags]
        nbformat.write(nb, chapter)
    config_path = book / "_config.yml"
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    # sphinx-jupyterbook-latex adds nodes that only the html and latex builders know; singlehtml stops on them.
    config.setdefault("latex", {})["use_jupyterbook_latex"] = False
    config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")


def build_singlehtml(book: Path) -> Path:
    """Jupyter Book's one-page build of `book` (stored outputs) into intro.html (the root page); return its folder."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", str(book), "--builder", "singlehtml",
                             "--path-output", str(book / "out")], capture_output=True, text=True, timeout=900)
    site = book / "out" / "_build" / "singlehtml"
    if result.returncode != 0 or not (site / "intro.html").is_file():
        raise RuntimeError(f"jupyter-book singlehtml build failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    # The theme's pages load searchindex.js (search as you type), which the one-page builder does not write: an empty
    # index keeps the printing browser from a 404 (the PDF has no search box to use it).
    if not (site / "searchindex.js").exists():
        (site / "searchindex.js").write_text("Search.setIndex({});\n", encoding="utf-8")
    return site


def pdf_pages(path: Path) -> list[str]:
    """The text of each page of a PDF (poppler's pdftotext, keeping the layout)."""
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout
    return text.split("\f")


def start_pages(pages: list[str], titles: list[str]) -> list[int]:
    """The page (counted from 1) on which each title starts a chapter, in order: the first page after the contents,
    and after the previous title's page, whose first lines hold the title."""
    flat = [" ".join(page.split()) for page in pages]
    last = " ".join(titles[-1].split())[:40]
    contents_end = next(n for n, page in enumerate(flat) if last in page)  # the contents list every title first
    found, after = [], contents_end + 1
    for title in titles:
        want = " ".join(title.split())[:40]
        number = next((n for n in range(after, len(flat)) if want in flat[n][:400]), None)
        if number is None:
            raise RuntimeError(f"the printed PDF has no page starting {title!r} after page {after}")
        found.append(number + 1)
        after = number
    return found


def print_pdf(site: Path, out: Path, title: str, parts: list) -> dict:
    """Print the one-page site to `out` twice: once to find the page on which each chapter starts, once with those
    numbers in the contents. Return what happened (titles, their pages, network requests refused, JS errors)."""
    with browser.serve(site) as base, browser.offline_page(base, {"width": 1100, "height": 1400}) as off:
        page = off.page
        page.goto(f"{base}/intro.html", wait_until="load", timeout=180_000)
        drawn = page.evaluate(browser.READY_JS)
        titles = page.evaluate(TOC_JS, [title, parts])
        page.add_style_tag(content=PRINT_CSS)
        page.emulate_media(media="print")
        out.parent.mkdir(parents=True, exist_ok=True)

        def printed() -> None:
            page.pdf(path=str(out), format="A4", print_background=True, display_header_footer=True,
                     header_template="<span></span>", footer_template=FOOTER, outline=True, tagged=True,
                     margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"})

        printed()
        numbers = start_pages(pdf_pages(out), titles)
        page.evaluate(PAGES_JS, numbers)
        printed()
        return {"titles": titles, "pages": numbers, "views_drawn": drawn, "aborted": off.aborted,
                "errors": off.errors}


EDITIONS = ("book", "student")


# The appendices written for the instructor: the rubrics (every pencil-and-paper answer), the course plan and the
# grader's workings. The student edition leaves them out.
INSTRUCTOR_ONLY = ("appendices/instructor_guide", "appendices/course_kit", "appendices/exercise_guide")


def to_student_edition(book: Path) -> None:
    """Turn a copy of the book into its student edition, in place: the chapters without their solutions (stored
    outputs kept), and without the instructor's appendices (INSTRUCTOR_ONLY: out of the contents and of the copy; a
    page's link to one prints as plain text)."""
    for chapter in sorted((book / "chapters").glob("*.ipynb")):
        write_student_edition(chapter, chapter.parent, keep_outputs=True)
    toc_path = book / "_toc.yml"
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    for part in toc["parts"]:
        part["chapters"] = [entry for entry in part["chapters"] if entry["file"] not in INSTRUCTOR_ONLY]
    toc["parts"] = [part for part in toc["parts"] if part["chapters"]]
    toc_path.write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    for name in INSTRUCTOR_ONLY:
        (book / f"{name}.md").unlink(missing_ok=True)


def build(out: Path = DEFAULT_OUT, files: list[str] | None = None, edition: str = "book") -> dict:
    """The PDF edition into `out` (with `files`, only those chapters and appendices: see browser.copy_book); return a
    summary (see print_pdf) with the parts printed and the seconds each step took. ``edition="student"`` prints the
    chapters without their solutions (tools/book/student_edition.py, stored outputs kept), for handing out."""
    if edition not in EDITIONS:
        raise SystemExit(f"no edition {edition!r}: choose one of {EDITIONS}")
    vendor.ensure()  # here rather than in the build, where a missing npm would only be a warning
    title = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"]
    if edition == "student":
        title = f"{title} (student edition, without solutions)"
    with tempfile.TemporaryDirectory(prefix="tfm-pdf-") as tmp:
        book = browser.copy_book(Path(tmp) / "book", files)
        if edition == "student":
            to_student_edition(book)
        prepare(book)
        start = time.perf_counter()
        site = build_singlehtml(book)
        built = time.perf_counter()
        parts = book_parts(book)
        summary = print_pdf(site, out, title, parts)
        summary["parts"] = parts
        summary["seconds"] = {"build": round(built - start, 1), "print": round(time.perf_counter() - built, 1)}
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The book as one PDF, printed by headless Chromium.")
    parser.add_argument("out", type=Path, nargs="?", default=None)
    parser.add_argument("--edition", default="book", choices=EDITIONS, help="student: without the solutions")
    args = parser.parse_args()
    target = args.out or (DEFAULT_OUT if args.edition == "book" else DEFAULT_OUT.with_name(
        f"{DEFAULT_OUT.stem}-student.pdf"))
    info = build(target, edition=args.edition)
    # What happened while printing, beside the PDF: `make pdf-check` (tests/test_pdf.py) reads it back.
    target.with_suffix(".json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(f"{target}: {target.stat().st_size / 1e6:.1f} MB, {len(info['titles'])} chapters and appendices, "
          f"build {info['seconds']['build']} s, print {info['seconds']['print']} s")
    for what in ("aborted", "errors"):
        if info[what]:
            print(f"{what}: {info[what]}", file=sys.stderr)
    if not info["views_drawn"]:
        print("warning: chapter 8's attention views had not drawn", file=sys.stderr)
