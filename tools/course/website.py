"""The website's own Sphinx extension (`local_extensions` in _config.yml): what the book's pages need that Jupyter Book
and its theme do not give them. Every HTML build loads it: `make book`, the PDF edition's one-page build, the copies
that tools/course/browser.py builds.

- Offline. MathJax, and every script that a page loads from jsDelivr's npm mirror (chapter 8's bertviz views load d3
  and jQuery from there), are served from the site itself, as `_static/npm/<package>/<file>`, copied from the npm
  copies of vendor.py; the jsDelivr URLs in a page are rewritten to them. A downloaded copy of the site, or a classroom
  without network, shows typeset math and draws the views. Not through html_static_path: Jupyter Book injects every
  *.js found there into every page. tfm.attnviz keeps the CDN URLs in the notebooks, where Jupyter and Colab cannot
  read the site's files (see its docstring). A URL without an npm copy, or no npm at all, is a build warning: `make
  book` and `make build-check`, with warnings as errors, stop and say why; a build without -W falls back to loading
  MathJax from its CDN, as Sphinx does by default.
- One script, not two. sphinx-thebe adds its settings with `app.add_js_file(None, body=...)` after the builder is set
  up; Sphinx 7.4 then lists that script twice (once under the file name None, once under ''), and the second
  `const THEBE_JS_URL` is a SyntaxError on every page. A page's repeated scripts are dropped.
- Numbers within a chapter. Sphinx numbers figures and sphinx-exercise's exercises across the whole book when the
  table of contents is not numbered (chapter 12's exercises were 56 to 60); each is renumbered within its chapter,
  "Exercise 12.3", "Fig. 12.1", so that `{numref}` links and the pages agree with the chapter's own numbering.
- Bibliography entries. docutils gives each entry of a citation list the DPUB role doc-biblioentry, deprecated, so
  the list (role "list") holds no list items for assistive technology (axe-core: aria-required-children, critical);
  each entry becomes a "listitem".
"""

from __future__ import annotations

import re
import shutil
from functools import partial
from pathlib import Path

from sphinx.util import logging

from tools.course import vendor

logger = logging.getLogger(__name__)

SITE_DIR = "npm"  # under the site's _static: the npm copies, laid out as in node_modules
CDN_URL = re.compile(re.escape(vendor.CDN_PREFIX) + r"[^\s\"'<>()]+")


def use_local_copies(state: dict, app, config) -> None:
    """config-inited: find (or install) the npm copies; point Sphinx's MathJax at the site's copy."""
    try:
        state["modules"] = vendor.ensure()
    except RuntimeError as error:
        state["modules"] = None
        logger.warning(f"{error}\nThe pages will load MathJax (and chapter 8's d3 and jQuery) from a CDN: without "
                       "network, readers see raw TeX.", type="tfm", subtype="offline")
        return
    config.mathjax_path = f"{SITE_DIR}/{vendor.MATHJAX_ENTRY}"


def local_url(state: dict, app, pagename: str, pathto, url: str) -> str:
    """The site's URL (relative to the page) of the npm copy of a jsDelivr `url`, copied into the site; `url` itself
    (and a warning) when there is no copy."""
    modules = state["modules"]
    path = vendor.cdn_copy(url, modules)
    if path is None:
        logger.warning(f"{url} would load from a CDN, and {modules} holds no copy of it: add the package at that "
                       "version to vendor.PACKAGES", location=pagename, type="tfm", subtype="offline")
        return url
    relative = path.relative_to(modules)
    site = Path(app.outdir) / "_static" / SITE_DIR
    if not (site / relative).is_file():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, site / relative)
        for licence in (modules / relative.parts[0]).glob("LICEN[SC]E*"):  # the package's licence travels with it
            shutil.copy2(licence, site / relative.parts[0] / licence.name)
    return pathto(f"_static/{SITE_DIR}/{relative.as_posix()}", 1)


def unique_scripts(scripts: list) -> list:
    """`scripts` (Sphinx's script_files) without repeats: an asset named None and one named '' are the same."""
    seen, kept = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {})
        key = (getattr(script, "filename", script) or "", tuple(sorted(attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    return kept


def fix_page(state: dict, app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """html-page-context: each script once; the page's CDN URLs made local; bibliography entries as list items."""
    if "script_files" in context:
        context["script_files"] = unique_scripts(context["script_files"])
    body = context.get("body")
    if not body:
        return
    body = body.replace('role="doc-biblioentry"', 'role="listitem"')
    if state.get("modules") is not None:
        body = CDN_URL.sub(lambda m: local_url(state, app, pagename, context["pathto"], m.group(0)), body)
    context["body"] = body


def copy_mathjax(state: dict, app, exception) -> None:
    """build-finished: MathJax's web files into the site's _static/npm/mathjax."""
    if exception is None and app.builder.format == "html" and state.get("modules") is not None:
        vendor.copy_mathjax(state["modules"], Path(app.outdir) / "_static" / SITE_DIR)


CHAPTER_DOC = re.compile(r"^chapters/(\d+)_")


def number_within_chapters(app, env) -> list[str]:
    """env-get-updated, after Sphinx has numbered every figure and exercise of the book in one sequence: each number
    of a chapter's page becomes (chapter, k), k counting that kind of object within the page from 1."""
    for docname, kinds in env.toc_fignumbers.items():
        chapter = CHAPTER_DOC.match(docname)
        if not chapter:
            continue
        for kind, numbers in kinds.items():
            in_order = sorted(numbers, key=numbers.get)
            kinds[kind] = {key: (int(chapter.group(1)), k) for k, key in enumerate(in_order, start=1)}
    return []


def setup(app):
    state: dict = {}
    app.connect("config-inited", partial(use_local_copies, state))
    app.connect("html-page-context", partial(fix_page, state))
    app.connect("build-finished", partial(copy_mathjax, state))
    app.connect("env-get-updated", number_within_chapters, priority=900)  # after Sphinx's own numbering (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
