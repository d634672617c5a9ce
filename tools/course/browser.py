"""Headless Chromium with the network cut off, for the tools and tests that need a real browser.

Used by the PDF edition (pdf.py prints the book), the slides' test and the website's browser test: a page may
reach only the local server (or local files) it was opened on; a request for a package on the jsDelivr CDN is
answered from the npm copy in `node_modules` when one is installed there (tfm.attnviz's d3 and jQuery); every other
request is aborted and recorded, so a test can assert that nothing wanted the network.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tools import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CDN_PREFIX = "https://cdn.jsdelivr.net/npm/"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
# What a build of the book reads: building a copy leaves the repository's _build (and a running `make book`) alone.
BOOK_FILES = ("_config.yml", "_toc.yml", "references.bib", "intro.md", "assets", "_static", "chapters", "appendices")


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


def cdn_copy(url: str, node_modules: Path | None) -> Path | None:
    """https://cdn.jsdelivr.net/npm/<name>@<version>/<file> -> node_modules/<name>/<file>, if that very version is
    installed there; None otherwise."""
    if node_modules is None or not url.startswith(CDN_PREFIX):
        return None
    spec, _, rest = url[len(CDN_PREFIX):].partition("/")
    name, _, version = spec.rpartition("@") if spec.startswith("@") else spec.partition("@")
    manifest = node_modules / name / "package.json"
    if not manifest.is_file() or f'"version": "{version}"' not in manifest.read_text(encoding="utf-8"):
        return None
    path = node_modules / name / rest
    return path if path.is_file() else None


class OfflinePage:
    """What an offline page did: `served` (CDN URLs answered from npm copies), `aborted` (requests refused) and
    `errors` (uncaught JavaScript errors)."""

    def __init__(self, page):
        self.page = page
        self.served: list[str] = []
        self.aborted: list[str] = []
        self.errors: list[str] = []


@contextmanager
def offline_page(allowed: str, node_modules: Path | None = None,
                 viewport: dict | None = None) -> Iterator[OfflinePage]:
    """A Chromium page that may load only URLs starting with `allowed` (e.g. the `serve` URL, or "file://")."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=viewport or {"width": 1300, "height": 2400})
            offline = OfflinePage(page)
            page.on("pageerror", lambda error: offline.errors.append(str(error)))

            def route(r):
                url = r.request.url
                if url.startswith(allowed):
                    r.continue_()
                elif (path := cdn_copy(url, node_modules)) is not None:
                    offline.served.append(url)
                    r.fulfill(path=str(path))
                else:
                    offline.aborted.append(url)
                    r.abort()

            page.route("**/*", route)
            yield offline
        finally:
            browser.close()
