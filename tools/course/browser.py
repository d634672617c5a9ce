"""Headless Chromium with the network cut off, for the tools and tests that need a real browser.

Used by the PDF edition (pdf.py prints the book), the slides' test and the website's browser test: a page may
reach only this machine, the local server (or local files) it was opened on; every other request fails and is
recorded, as are the page's uncaught JavaScript errors and console errors, so a test can assert that nothing wanted
the network and nothing went wrong. The site serves its own MathJax, d3 and jQuery (website.py): nothing needs a CDN.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tools import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
# The network, cut inside the browser: no host name resolves, and every request that is not for this machine goes to a
# proxy where nothing listens (port 9), so an address written in digits fails too; 127.0.0.1 (the local server, which
# bypasses any proxy) and file:// URLs still load. Cheaper than intercepting each request with Playwright's page.route
# (measured: 17 CPU-seconds against 13 for the same 8 page loads), and it also covers what a page's workers request.
OFFLINE_ARGS = ["--proxy-server=http://127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"]
# What a build of the book reads: building a copy leaves the repository's _build (and a running `make book`) alone.
BOOK_FILES = ("_config.yml", "_toc.yml", "references.bib", "intro.md", "assets", "_static", "chapters", "appendices")
# A page ready to look at: MathJax has typeset, every image has loaded. Returns whether every bertviz view (chapter 8)
# has drawn its SVG (true on a page without one): they draw once d3 and jQuery have loaded.
READY_JS = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(done => { img.onload = img.onerror = done; })));
  return [...document.querySelectorAll('[id^="bertviz-"]')].every(view => view.querySelector('svg'));
}
"""
# What shows only if TeX was not typeset: a macro of the book or of LaTeX, or math delimiters (in the text a reader
# sees, code aside).
RAW_TEX = re.compile(r"\\(sqrt|frac|softmax|dmodel|WQ|WK|WV|WO|operatorname|mathbb|left|right|top|begin)\b"
                     r"|\$\$|\\\(|\\\[")


def copy_book(dest: Path, files: list[str] | None = None) -> Path:
    """Copy the book's source files (BOOK_FILES) into `dest`, for a build from the stored outputs; return `dest`.
    With `files` (paths as _toc.yml writes them, e.g. "chapters/02_attention_as_matrices"), the copy's table of
    contents keeps only those, in the book's order and parts: a small book that builds in seconds."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in BOOK_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        else:
            shutil.copy(src, dest / name)
    config = yaml.safe_load((dest / "_config.yml").read_text(encoding="utf-8"))
    extensions = config.get("sphinx", {}).get("local_extensions") or {}
    if extensions:  # the book's own extension lives in the repository (tools/), not in the copy
        config["sphinx"]["local_extensions"] = {name: str((ROOT / path).resolve()) for name, path in extensions.items()}
        (dest / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    if files is not None:
        toc = yaml.safe_load((dest / "_toc.yml").read_text(encoding="utf-8"))
        unknown = set(files) - {entry["file"] for part in toc["parts"] for entry in part["chapters"]}
        if unknown:
            raise ValueError(f"not in _toc.yml: {sorted(unknown)}")
        for part in toc["parts"]:
            part["chapters"] = [entry for entry in part["chapters"] if entry["file"] in files]
        toc["parts"] = [part for part in toc["parts"] if part["chapters"]]
        (dest / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    return dest


def missing(poppler: bool = False) -> str | None:
    """What the browser checks need and this machine lacks, as an install hint; None when nothing is missing.
    `poppler`: also the tools that read a PDF back (pdftotext, pdftoppm, pdfinfo)."""
    if CHROMIUM is None:
        return "chromium is not installed (apt-get install -y chromium)"
    if shutil.which("npm") is None:
        return "npm is not installed (apt-get install -y npm)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r requirements.txt)"
    gone = [tool for tool in ("pdftotext", "pdftoppm", "pdfinfo") if poppler and shutil.which(tool) is None]
    return f"poppler is not installed ({', '.join(gone)}: apt-get install -y poppler-utils)" if gone else None


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve `folder` on 127.0.0.1 (a free port) for the duration; yield its base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class OfflinePage:
    """What an offline page did: `aborted` (its requests for anything outside `allowed`, which fail: the network is
    cut) and `errors` (uncaught JavaScript errors, and console errors such as a resource that failed to load, prefixed
    "console: ")."""

    def __init__(self, page):
        self.page = page
        self.aborted: list[str] = []
        self.errors: list[str] = []


@contextmanager
def offline_page(allowed: str, viewport: dict | None = None) -> Iterator[OfflinePage]:
    """A Chromium page with the network cut (OFFLINE_ARGS): it reaches only this machine, e.g. the `serve` URL or
    file:// URLs; its requests for URLs that do not start with `allowed` are recorded."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *OFFLINE_ARGS])
        try:
            page = browser.new_page(viewport=viewport or {"width": 1300, "height": 2400})
            offline = OfflinePage(page)
            page.on("pageerror", lambda error: offline.errors.append(str(error)))
            page.on("console", lambda message: offline.errors.append(f"console: {message.text}")
                    if message.type == "error" else None)
            page.on("request", lambda request: None if request.url.startswith((allowed, "data:", "blob:"))
                    else offline.aborted.append(request.url))
            yield offline
        finally:
            browser.close()
