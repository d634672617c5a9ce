"""The website as a reader's browser shows it, with the network cut off. Every page of the built book is opened once,
each as a first visit (nothing stored by an earlier page), in headless Chromium that reaches only the local server;
on every page no request leaves the site (MathJax, d3 and jQuery are the site's own copies: tools/course/website.py),
the console shows no error, MathJax has typeset every formula (no raw TeX in the text a reader sees), and axe-core
finds no serious or critical accessibility violation. Chapter 8's bertviz views draw, and every schematic figure loads
with alt text.

The test opens the book built from the stored outputs (`make test` builds it once, with warnings as errors, and
passes it as TFM_SITE; run alone, the test builds a copy of the repository's book files), serves it on 127.0.0.1,
and opens its pages in two browsers at once (tools/course/browser.py; Playwright). axe-core comes from npm at test
time.

Skipped when chromium, npm or playwright is missing, unless TFM_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tools.book.figure_text import DISPLAY_WIDTH
from tools.course import vendor
from tools.course.browser import RAW_TEX, READY_JS, copy_book, offline_page, serve

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "chapters/08_inside_bert"
AXE = {"axe-core": "4.14.1"}  # the accessibility checker
SCHEMATIC_CHAPTERS = {"01", "02", "03", "04", "05", "06", "07", "09", "10"}  # each shows at least one
MATH = re.compile(r'class="math notranslate nohighlight"')  # a formula, as Sphinx writes it (MathJax typesets it)

# What a page shows once ready: its formulas (typeset or not), the text a reader sees outside code, figures, views.
PAGE_JS = r"""() => {
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, textarea, mjx-container').forEach(e => e.remove());
  const formulas = [...document.querySelectorAll('.math')];
  return {
    formulas: formulas.length,
    typeset: formulas.filter(f => f.querySelector('mjx-container')).length,
    mathErrors: [...document.querySelectorAll('mjx-merror')].map(e => e.getAttribute('data-mjx-error') || ''),
    prose: prose.textContent,
    figures: [...document.querySelectorAll('figure[id^=fig-] img')].map(img => ({
      src: img.getAttribute('src'), alt: img.getAttribute('alt') || '', loaded: img.complete && img.naturalWidth > 0,
      caption: (img.closest('figure').querySelector('figcaption') || {}).textContent || ''})),
    views: [...document.querySelectorAll('div[id^=bertviz-]')].map(div => ({
      id: div.id, texts: [...div.querySelectorAll('svg text')].map(t => t.textContent.trim()),
      lines: div.querySelectorAll('svg line').length})),
  };
}"""
VIEWS_DRAWN = """() => [...document.querySelectorAll('div[id^=bertviz-]')].every(view => view.querySelector('svg'))
  && document.querySelectorAll('[id^=bertviz-] svg text').length > 100"""
# Colour contrast, axe's slowest rule (about half of its time), depends on the theme, the code highlighting and the
# output styles, which pages of one kind share: it is checked on one page of each kind, every other rule on every page.
CONTRAST_PAGES = {"intro.html", "chapters/01_attention_token_by_token.html", "chapters/08_inside_bert.html",
                  "appendices/glossary.html", "appendices/exercise_guide.html", "genindex.html", "search.html"}
# The page as a reader at 1280 px sees it with every fold open (hidden code, solutions): the code and output blocks
# wider than their box (cut at the right edge, tools/book/page_width.py says why), and how wide each figure is shown.
UNFOLD_JS = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
}"""
WIDTH_JS = """() => {
  const shown = e => e.offsetParent !== null && e.getClientRects().length > 0;
  const longest = pre => pre.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a, '');
  return {
    clipped: [...document.querySelectorAll('main pre')].filter(pre => shown(pre)
        && pre.scrollWidth > pre.clientWidth + 1).map(pre => ({
      kind: pre.closest('.cell_output') ? 'output' : pre.closest('.cell_input') ? 'code' : 'text',
      excess: pre.scrollWidth - pre.clientWidth, line: longest(pre).slice(0, 70)})),
    blocks: [...document.querySelectorAll('main pre')].filter(shown).length,
    images: [...document.querySelectorAll('main .cell_output img, main figure img')].filter(shown).map(img => ({
      src: img.getAttribute('src'), shown: img.clientWidth, natural: img.naturalWidth})),
    pageWidth: document.documentElement.scrollWidth,
  };
}"""
PHONE_JS = """() => ({
  pageWidth: document.documentElement.scrollWidth,
  unscrollable: [...document.querySelectorAll('main pre')].filter(pre => pre.scrollWidth > pre.clientWidth + 1
      && !['auto', 'scroll'].includes(getComputedStyle(pre).overflowX)).length,
})"""
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
AXE_JS = """async (contrast) => (await axe.run(document, {resultTypes: ['violations'],
                                                    rules: {'color-contrast': {enabled: contrast}}})).violations
  .filter(v => v.impact === 'serious' || v.impact === 'critical')
  .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.html)}))"""


@pytest.fixture(scope="module")
def axe_js(browser_tools, tmp_path_factory) -> str:
    """axe-core, from npm (never committed)."""
    modules = vendor.ensure(tmp_path_factory.mktemp("npm"), AXE)
    return (modules / "axe-core" / "axe.min.js").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(browser_tools, tmp_path_factory) -> Path:
    """The whole book, built from the stored outputs: the build that `make test` has just made with warnings as errors
    (TFM_SITE, its _build/html), or else one into a temporary folder."""
    if os.environ.get("TFM_SITE"):
        html = Path(os.environ["TFM_SITE"])
        assert (html / f"{CHAPTER}.html").exists(), f"TFM_SITE={html} holds no built book"
        return html
    book = copy_book(tmp_path_factory.mktemp("book"))
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", str(book), "--path-output", str(book / "out")],
                            capture_output=True, text=True, timeout=900)
    html = book / "out" / "_build" / "html"
    assert result.returncode == 0 and (html / f"{CHAPTER}.html").exists(), result.stdout[-3000:] + result.stderr
    return html


def site_pages(site: Path) -> list[str]:
    """Every HTML page of the site (the theme's templates under _static and a redirect page aside)."""
    pages = []
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site).as_posix()
        if not relative.startswith(("_static/", "_sources/")) and 'http-equiv="Refresh"' not in path.read_text(
                encoding="utf-8"):
            pages.append(relative)
    return pages


def _visit(server: str, site: Path, pages: list[str], axe_js: str) -> dict[str, dict]:
    """Open `pages` in turn, each as a first visit, in one offline browser: what each requested outside the site, its
    errors, what it shows (PAGE_JS) and axe-core's serious and critical violations."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    found = {}
    with offline_page(server, viewport=DESKTOP) as offline:
        page = offline.page
        page.add_init_script("try { localStorage.clear(); } catch (e) {}")  # nothing stored by an earlier page
        for relative in pages:
            offline.aborted.clear()
            offline.errors.clear()
            page.goto(f"{server}/{relative}", wait_until="load")
            page.evaluate(READY_JS)
            if page.locator("div[id^=bertviz-]").count():
                try:
                    page.wait_for_function(VIEWS_DRAWN, timeout=30_000)
                except PlaywrightTimeout:  # test_bertviz_views_draw_offline says which did not draw
                    pass
            shown = page.evaluate(PAGE_JS)
            page.add_script_tag(content=axe_js)
            shown["violations"] = page.evaluate(AXE_JS, relative in CONTRAST_PAGES)
            page.evaluate(UNFOLD_JS)
            shown["desktop"] = page.evaluate(WIDTH_JS)
            page.set_viewport_size(PHONE)
            shown["phone"] = page.evaluate(PHONE_JS)
            page.set_viewport_size(DESKTOP)
            shown.update(aborted=list(offline.aborted), errors=list(offline.errors))
            shown["formulas_in_html"] = len(MATH.findall((site / relative).read_text(encoding="utf-8")))
            found[relative] = shown
    return found


@pytest.fixture(scope="module")
def visits(site, axe_js) -> dict[str, dict]:
    """Every page of the site, visited once (_visit). The pages are shared between two browsers (one on a 1-core
    machine; more would take cores from the notebook passes that `make test` runs beside the unit tests), the largest
    first, each to the browser with the fewest bytes to open so far: a page's time grows with its size."""
    workers = max(1, min(2, os.cpu_count() or 1))
    shares: list[list[str]] = [[] for _ in range(workers)]
    load = [0] * workers
    for relative in sorted(site_pages(site), key=lambda p: -(site / p).stat().st_size):
        least = load.index(min(load))
        shares[least].append(relative)
        load[least] += (site / relative).stat().st_size
    with serve(site) as server, ThreadPoolExecutor(workers) as pool:
        return {page: shown for found in pool.map(lambda share: _visit(server, site, share, axe_js), shares)
                for page, shown in found.items()}


def test_no_code_or_output_cut_at_1280_px(visits):
    """At 1280 x 900, with every fold open, no code, output or text block is wider than its box: nothing is cut."""
    clipped = {page: seen["desktop"]["clipped"] for page, seen in visits.items() if seen["desktop"]["clipped"]}
    assert not clipped, f"blocks cut at the right edge at 1280 px (tools/book/page_width.py): {json.dumps(clipped)}"
    measured = sum(seen["desktop"]["blocks"] for seen in visits.values())
    assert measured > 500, f"only {measured} code and output blocks measured: the measurement is broken"


def test_figures_shown_at_least_as_wide_as_the_legibility_check_assumes(visits):
    """tests/test_figures.py derives each figure's text size on the page from DISPLAY_WIDTH: a figure is shown at its
    own width up to the column's; here the browser shows that the page really lays figures out so at 1280 px."""
    narrow = [(page, image) for page, seen in visits.items() for image in seen["desktop"]["images"]
              if image["natural"] and image["shown"] < min(image["natural"], DISPLAY_WIDTH) - 2]
    assert not narrow, f"figures shown narrower than min(own width, {DISPLAY_WIDTH} px): {narrow[:5]}"
    chapters = [seen for page, seen in visits.items() if page.startswith("chapters/")]
    assert sum(len(seen["desktop"]["images"]) for seen in chapters) > 60, "figures not found on the chapters' pages"
    widest = max(image["shown"] for seen in chapters for image in seen["desktop"]["images"])
    assert widest <= DISPLAY_WIDTH + 20, f"a figure shown {widest} px wide: the column is wider than {DISPLAY_WIDTH}"


def test_pages_usable_on_a_phone(visits):
    """At 390 px (a phone) no page scrolls sideways as a whole: a code block too wide for the screen scrolls inside
    its own box (the choice made for phones: code keeps its lines rather than wrapping them)."""
    wide = {page: seen["phone"]["pageWidth"] for page, seen in visits.items()
            if seen["phone"]["pageWidth"] > PHONE["width"] + 1}
    assert not wide, f"pages wider than a 390-px phone screen (they scroll sideways): {wide}"
    stuck = {page: seen["phone"]["unscrollable"] for page, seen in visits.items() if seen["phone"]["unscrollable"]}
    assert not stuck, f"blocks cut on a phone that cannot be scrolled: {stuck}"


def test_every_page_is_visited(site, visits):
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    book = {toc["root"]} | {entry["file"] for part in toc["parts"] for entry in part["chapters"]}
    missed = {f"{file}.html" for file in book} - set(visits)
    assert not missed and len(book) >= 20, f"pages of the book not visited: {sorted(missed)}"
    assert {"genindex.html", "search.html"} <= set(visits)


def test_nothing_from_the_network(site, visits):
    requests = {page: seen["aborted"] for page, seen in visits.items() if seen["aborted"]}
    assert not requests, f"requests outside the site (aborted, offline): {requests}"
    cdn = [path.relative_to(site).as_posix() for path in site.rglob("*.html")
           if re.search(r"<script[^>]*\ssrc=\"https?://|cdn\.jsdelivr\.net", path.read_text(encoding="utf-8"))]
    assert not cdn, f"pages that load a script from a CDN: {cdn}"


def test_no_console_errors(visits):
    errors = {page: seen["errors"] for page, seen in visits.items() if seen["errors"]}
    assert not errors, f"JavaScript or console errors: {errors}"


def test_math_typeset_on_every_page(visits):
    for page, seen in visits.items():
        assert seen["formulas"] == seen["formulas_in_html"], f"{page}: {seen['formulas']} formulas on the page"
        assert seen["typeset"] == seen["formulas"], f"{page}: {seen['formulas'] - seen['typeset']} formulas left as TeX"
        assert not seen["mathErrors"], f"{page}: MathJax errors {seen['mathErrors'][:5]}"
        raw = [" ".join(seen["prose"][max(m.start() - 30, 0):m.end() + 30].split())
               for m in RAW_TEX.finditer(seen["prose"])]
        assert not raw, f"{page}: raw TeX where a reader sees it: {raw[:5]}"
    with_math = [page for page, seen in visits.items() if seen["formulas"]]
    assert f"{CHAPTER}.html" in with_math and len(with_math) >= 13, f"formulas found only on {with_math}"


def test_no_serious_accessibility_violations(visits):
    assert CONTRAST_PAGES <= set(visits), f"pages checked for contrast but not visited: {CONTRAST_PAGES - set(visits)}"
    found = {page: seen["violations"] for page, seen in visits.items() if seen["violations"]}
    assert not found, f"serious or critical accessibility violations (axe-core): {json.dumps(found, indent=1)}"


def test_bertviz_views_draw_offline(visits):
    views = visits[f"{CHAPTER}.html"]["views"]
    ids = [view["id"] for view in views]
    assert len(ids) == len(set(ids)) == 5, f"expected 5 views with distinct ids, got {ids}"
    assert sum({"Layers", "Heads"} <= set(view["texts"]) for view in views) == 1, "no model view drawn"
    for view in views:
        texts = set(view["texts"])
        if {"Layers", "Heads"} <= texts:  # the model view: 6 x 12 thumbnails, tokens appear only when one is clicked
            assert view["lines"] > 72 * 6, f"model view {view['id']} drew {view['lines']} lines"
            continue
        animal = {"animal", "street", "it"} <= texts
        time_flies = {"time", "flies", "arrow"} <= texts
        date = {"tuesday", "march", "3"} <= texts  # encoder side of the date translator's encoder-decoder view
        assert animal or time_flies or date, f"view {view['id']} drew no sentence tokens: {sorted(texts)[:20]}"


def _schematics_used(notebook: Path) -> list[str]:
    """The schematic names a chapter shows with tfm.viz.schematic("name")."""
    sources = ["".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
               if c["cell_type"] == "code"]
    return [name for source in sources for name in re.findall(r'tfm\.viz\.schematic\("(\w+)"\)', source)]


def test_every_schematic_loads_with_alt_text(visits):
    chapters = sorted((ROOT / "chapters").glob("*.ipynb"))
    used = {path.stem: _schematics_used(path) for path in chapters}
    shipped = {p.stem for p in (ROOT / "src" / "tfm" / "schematics").glob("*.svg")}
    assert shipped <= {name for names in used.values() for name in names}, "a schematic no chapter shows"
    without = [stem for stem, names in used.items() if not names and stem[:2] in SCHEMATIC_CHAPTERS]
    assert not without, f"chapters without a schematic figure: {without}"
    for stem, names in used.items():
        svgs = [f for f in visits[f"chapters/{stem}.html"]["figures"] if f["src"].endswith(".svg")]
        assert len(svgs) == len(names), f"{stem}: {len(names)} schematics in the notebook, {len(svgs)} on the page"
        for figure in svgs:
            assert figure["loaded"], f"{stem}: figure {figure['src']} did not load"
            assert len(figure["alt"].split()) >= 10 and not figure["alt"].endswith(".svg"), (
                f"{stem}: figure {figure['src']} has no alt text that describes it: {figure['alt']!r}")
            assert re.match(r"\s*Fig\. \d+", figure["caption"]), f"{stem}: figure without numbered caption"
