"""The website as a reader's browser shows it, with the network cut off: chapter 8's bertviz views draw, every
schematic figure loads and has alt text, and the home page and two chapters pass axe-core's accessibility check.

The test opens the book built from the stored outputs (`make test` builds it once, with warnings as errors, and
passes it as TFM_SITE; run alone, the test builds a copy of the repository's book files), serves it on 127.0.0.1,
and opens it in headless Chromium through Playwright, with the network cut: the site serves its own MathJax, d3 and
jQuery (tools/course/website.py), and any request outside it fails. axe-core comes from npm at test time.

Skipped when chromium, npm or playwright is missing, unless TFM_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.course import vendor
from tools.course.browser import copy_book, offline_page, serve

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "chapters/08_inside_bert"
NPM_PACKAGES = {"axe-core": "4.14.1"}  # the accessibility checker
SCHEMATIC_CHAPTERS = {"01", "02", "03", "04", "05", "06", "07", "09", "10"}  # each shows at least one


@pytest.fixture(scope="module")
def cdn_files(browser_tools, tmp_path_factory) -> Path:
    """npm copy of axe-core (never committed)."""
    return vendor.ensure(tmp_path_factory.mktemp("npm"), NPM_PACKAGES)


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


@pytest.fixture(scope="module")
def server(site):
    with serve(site) as url:
        yield url


def test_bertviz_views_draw_offline(server, cdn_files):
    with offline_page(server) as offline:
        page = offline.page
        page.goto(f"{server}/{CHAPTER}.html", wait_until="load")
        page.wait_for_function("document.querySelectorAll('[id^=bertviz-] svg text').length > 100", timeout=30_000)
        page.wait_for_timeout(1000)
        views = page.evaluate("""() => Array.from(document.querySelectorAll('div[id^=bertviz-]')).map(div => ({
            id: div.id, texts: Array.from(div.querySelectorAll('svg text')).map(t => t.textContent.trim()),
            lines: div.querySelectorAll('svg line').length}))""")
        aborted, errors = offline.aborted, offline.errors

    assert not aborted, f"requests outside the site (d3 and jQuery are the site's own): {aborted}"
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
    assert not [e for e in errors if "bertviz" in e or "d3" in e or "tfmAttnviz" in e], errors


def _schematics_used(notebook: Path) -> list[str]:
    """The schematic names a chapter shows with tfm.viz.schematic("name")."""
    sources = ["".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
               if c["cell_type"] == "code"]
    return [name for source in sources for name in re.findall(r'tfm\.viz\.schematic\("(\w+)"\)', source)]


def test_every_schematic_loads_with_alt_text(server):
    chapters = sorted((ROOT / "chapters").glob("*.ipynb"))
    used = {path.stem: _schematics_used(path) for path in chapters}
    shipped = {p.stem for p in (ROOT / "src" / "tfm" / "schematics").glob("*.svg")}
    assert shipped <= {name for names in used.values() for name in names}, "a schematic no chapter shows"
    without = [stem for stem, names in used.items() if not names and stem[:2] in SCHEMATIC_CHAPTERS]
    assert not without, f"chapters without a schematic figure: {without}"
    with offline_page(server) as offline:
        page = offline.page
        for stem, names in used.items():
            if not names:
                continue
            page.goto(f"{server}/chapters/{stem}.html", wait_until="load")
            figures = page.evaluate("""() => Array.from(document.querySelectorAll('figure[id^=fig-] img')).map(img => ({
                src: img.getAttribute('src'), alt: img.getAttribute('alt') || '', loaded: img.complete &&
                img.naturalWidth > 0, caption: (img.closest('figure').querySelector('figcaption') || {}).textContent
                || ''}))""")
            svgs = [f for f in figures if f["src"].endswith(".svg")]
            assert len(svgs) == len(names), f"{stem}: {len(names)} schematics in the notebook, {len(svgs)} on the page"
            for figure in svgs:
                assert figure["loaded"], f"{stem}: figure {figure['src']} did not load"
                assert len(figure["alt"].split()) >= 10 and not figure["alt"].endswith(".svg"), (
                    f"{stem}: figure {figure['src']} has no alt text that describes it: {figure['alt']!r}")
                assert re.match(r"\s*Fig\. \d+", figure["caption"]), f"{stem}: figure without numbered caption"


@pytest.mark.parametrize("page_path", ["intro.html", "chapters/03_multi_head_attention.html",
                                       "chapters/07_encoder_decoder.html"])
def test_no_serious_accessibility_violations(server, cdn_files, page_path):
    axe = (cdn_files / "axe-core" / "axe.min.js").read_text(encoding="utf-8")
    with offline_page(server) as offline:
        page = offline.page
        page.goto(f"{server}/{page_path}", wait_until="load")
        page.wait_for_timeout(500)
        page.add_script_tag(content=axe)
        violations = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.html)}))""")
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not serious, f"{page_path}: serious or critical accessibility violations (axe-core): {serious}"
