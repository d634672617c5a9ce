"""The website really draws chapter 8's bertviz views: a real browser, with the network cut off.

The test builds a one-page Jupyter Book holding chapter 8 (the book's own _config.yml and references.bib, a _toc.yml
with that page as root), serves it on 127.0.0.1, and opens it in headless Chromium through Playwright. Every request
to 127.0.0.1 goes to the local server; the CDN files the page asks for (tfm.attnviz's d3 and jQuery) are answered
from copies that npm installs at test time; every other request is aborted. It then checks that each view's <svg>
holds the sentence's tokens.

Skipped when chromium, npm or playwright is missing, unless TFM_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "chapters/08_inside_bert"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NPM_PACKAGES = {"d3": "5.7.0", "jquery": "2.2.4"}  # the versions in tfm.attnviz's URLs


def _missing(what: str) -> None:
    if os.environ.get("TFM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{what} (TFM_REQUIRE_BROWSER=1: the browser test must run)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def tools():
    if CHROMIUM is None:
        _missing("chromium is not installed (apt-get install -y chromium)")
    if shutil.which("npm") is None:
        _missing("npm is not installed")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("playwright is not installed (pip install -r requirements.txt)")


@pytest.fixture(scope="module")
def cdn_files(tools, tmp_path_factory) -> Path:
    """npm copies of the libraries the page loads from the CDN (never committed)."""
    prefix = tmp_path_factory.mktemp("npm")
    specs = [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
    subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *specs], check=True,
                   capture_output=True, timeout=300)
    return prefix / "node_modules"


@pytest.fixture(scope="module")
def site(tools, tmp_path_factory) -> Path:
    """A one-page Jupyter Book of chapter 8, built from the stored outputs."""
    book = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "references.bib", "assets"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, book / name)
    (book / "chapters").mkdir()
    shutil.copy(ROOT / f"{CHAPTER}.ipynb", book / f"{CHAPTER}.ipynb")
    (book / "_toc.yml").write_text(f"format: jb-book\nroot: {CHAPTER}\n", encoding="utf-8")
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run([str(jupyter_book), "build", str(book), "--path-output", str(book / "out")],
                            capture_output=True, text=True, timeout=600)
    html = book / "out" / "_build" / "html"
    assert result.returncode == 0 and (html / f"{CHAPTER}.html").exists(), result.stdout[-3000:] + result.stderr
    return html


@pytest.fixture(scope="module")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _cdn_path(url: str, node_modules: Path) -> Path | None:
    """https://cdn.jsdelivr.net/npm/<name>@<version>/<file> -> node_modules/<name>/<file> (version checked)."""
    prefix = "https://cdn.jsdelivr.net/npm/"
    if not url.startswith(prefix):
        return None
    spec, _, rest = url[len(prefix):].partition("/")
    name, _, version = spec.partition("@")
    if NPM_PACKAGES.get(name) != version:
        return None
    path = node_modules / name / rest
    return path if path.is_file() else None


def test_bertviz_views_draw_offline(server, cdn_files):
    from playwright.sync_api import sync_playwright

    served, aborted, errors = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync"])
        page = browser.new_page(viewport={"width": 1300, "height": 2400})
        page.on("pageerror", lambda error: errors.append(str(error)))

        def route(r):
            url = r.request.url
            if url.startswith(server):
                r.continue_()
            elif (path := _cdn_path(url, cdn_files)) is not None:
                served.append(url)
                r.fulfill(path=str(path), content_type="application/javascript")
            else:
                aborted.append(url)
                r.abort()

        page.route("**/*", route)
        page.goto(f"{server}/{CHAPTER}.html", wait_until="load")
        page.wait_for_function("document.querySelectorAll('[id^=bertviz-] svg text').length > 100", timeout=30_000)
        page.wait_for_timeout(1000)
        views = page.evaluate("""() => Array.from(document.querySelectorAll('div[id^=bertviz-]')).map(div => ({
            id: div.id, texts: Array.from(div.querySelectorAll('svg text')).map(t => t.textContent.trim()),
            lines: div.querySelectorAll('svg line').length}))""")
        browser.close()

    assert len(set(served)) == 2, f"expected d3 and jQuery from the CDN copies, served {served}"
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
