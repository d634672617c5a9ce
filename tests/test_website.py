"""The website's Sphinx extension (tools/course/website.py) on its own, without a build or a browser: the CDN URLs of a
page become the site's own copies, a script listed twice is kept once, bibliography entries are list items; and the
libraries that tfm.attnviz's views load are among the pinned npm copies (tests/test_browser.py checks the built site).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

from sphinx.builders.html._assets import _JavaScript

import tfm.attnviz
from tools.course import vendor, website


def _fake_modules(tmp_path: Path) -> Path:
    """A node_modules folder holding d3 5.7.0's dist/d3.min.js and its licence."""
    package = tmp_path / "node_modules" / "d3"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "d3", "version": "5.7.0"}), encoding="utf-8")
    (package / "dist" / "d3.min.js").write_text("// d3", encoding="utf-8")
    (package / "LICENSE").write_text("licence", encoding="utf-8")
    return tmp_path / "node_modules"


def _page(tmp_path: Path, modules: Path | None, body: str, scripts: list | None = None) -> dict:
    app = SimpleNamespace(outdir=str(tmp_path / "site"))
    context = {"body": body, "pathto": lambda target, resource: f"../{target}", "script_files": scripts or []}
    website.fix_page({"modules": modules}, app, "chapters/08_inside_bert", "page.html", context, None)
    return context


def test_cdn_urls_become_the_sites_copies(tmp_path):
    modules = _fake_modules(tmp_path)
    body = "<script>load('https://cdn.jsdelivr.net/npm/d3@5.7.0/dist/d3.min.js');</script>"
    context = _page(tmp_path, modules, body)
    assert context["body"] == "<script>load('../_static/npm/d3/dist/d3.min.js');</script>"
    copied = tmp_path / "site" / "_static" / "npm" / "d3"
    assert (copied / "dist" / "d3.min.js").read_text() == "// d3" and (copied / "LICENSE").is_file()


def test_a_cdn_url_without_a_copy_is_a_warning(tmp_path, caplog):
    modules = _fake_modules(tmp_path)
    url = "https://cdn.jsdelivr.net/npm/d3@7.9.0/dist/d3.min.js"  # a version that is not installed
    with caplog.at_level(logging.WARNING):
        context = _page(tmp_path, modules, f"<script src='{url}'></script>")
    assert url in context["body"], "an URL without a copy is left as it is"
    assert any(url in record.getMessage() and "vendor.PACKAGES" in record.getMessage() for record in caplog.records)


def test_a_script_listed_twice_is_kept_once(tmp_path):
    # sphinx-thebe's settings, added after the builder was set up: Sphinx 7.4 lists them under None and under ''.
    body = 'const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"'
    scripts = [_JavaScript("_static/doctools.js", priority=200), _JavaScript(None, body=body),
               _JavaScript("", body=body), _JavaScript("_static/sphinx-thebe.js", **{"async": "async"})]
    kept = _page(tmp_path, None, "<p>text</p>", scripts)["script_files"]
    assert [script.filename or "" for script in kept] == ["_static/doctools.js", "", "_static/sphinx-thebe.js"]


def test_bibliography_entries_are_list_items(tmp_path):
    body = ('<div role="list" class="citation-list">\n<div class="citation" id="id6" role="doc-biblioentry">\n'
            '<span class="label">BKH16</span><p>Layer normalization.</p></div>\n</div>')
    fixed = _page(tmp_path, None, body)["body"]
    assert 'role="listitem"' in fixed and "doc-biblioentry" not in fixed


def test_attnviz_loads_pinned_npm_copies():
    for url in (tfm.attnviz.D3_URL, tfm.attnviz.JQUERY_URL):
        spec = url.removeprefix(vendor.CDN_PREFIX).split("/")[0]
        name, _, version = spec.partition("@")
        assert vendor.PACKAGES.get(name) == version, f"{url}: pin {name}@{version} in vendor.PACKAGES"
