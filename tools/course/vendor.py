"""Local copies of the JavaScript that the website, the slides and the PDF edition load (MathJax, d3, jQuery,
reveal.js), from npm.

A page, a deck or a PDF must render on a classroom machine with no network, so nothing is fetched from a CDN when it is
viewed or printed: `ensure()` installs the pinned packages once into build/vendor (npm registry, like pip for PyPI)
and returns their node_modules folder; later calls reuse it. `python -m tools.course.vendor` does the same from a shell.
The website's build serves its copies (tools/course/website.py); `cdn_copy` maps a jsDelivr URL to its npm copy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tools import ROOT

DEFAULT_PREFIX = ROOT / "build" / "vendor"
# MathJax 3 is the version Sphinx 7 loads on the website (mathjax3_config in _config.yml), so the book's TeX macros
# mean the same in the slides and the PDF; reveal.js 5's math plugin drives MathJax 3 from a local URL.
# d3 and jQuery are the versions tfm.attnviz's views load from jsDelivr (chapter 8's bertviz views).
PACKAGES = {"reveal.js": "5.2.1", "mathjax": "3.2.2", "d3": "5.7.0", "jquery": "2.2.4"}
CDN_PREFIX = "https://cdn.jsdelivr.net/npm/"  # jsDelivr's mirror of npm: <name>@<version>/<file in the package>
# What of MathJax a web page uses (the website and the PDF edition): TeX input with HTML output (the entry point and
# what it loads on demand: fonts, TeX extensions, the menu's renderers and accessibility tools with their speech
# rules) and its licence; not its other bundles (MathML input, SVG-only and combined builds: 16 MB more).
MATHJAX_WEB = ("es5/tex-chtml.js", "es5/output", "es5/input/tex/extensions", "es5/ui", "es5/a11y", "es5/sre", "LICENSE")
MATHJAX_ENTRY = "mathjax/es5/tex-chtml.js"  # relative to node_modules


def ensure(prefix: Path = DEFAULT_PREFIX, packages: dict[str, str] | None = None) -> Path:
    """Install `packages` (name -> exact version) under `prefix` unless already there; return its node_modules."""
    packages = PACKAGES if packages is None else packages
    modules = prefix / "node_modules"
    if all(_installed_version(modules, name) == version for name, version in packages.items()):
        return modules
    if shutil.which("npm") is None:
        raise RuntimeError("npm is not installed: it fetches MathJax, d3, jQuery and reveal.js once "
                           "(apt-get install -y npm)")
    specs = [f"{name}@{version}" for name, version in packages.items()]
    prefix.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                             *specs], capture_output=True, text=True, timeout=600)
    missing = [f"{n}@{v}" for n, v in packages.items() if _installed_version(modules, n) != v]
    if result.returncode != 0 or missing:
        raise RuntimeError(f"npm install {' '.join(specs)} failed (missing {missing}):\n{result.stderr[-2000:]}")
    return modules


def cdn_copy(url: str, node_modules: Path) -> Path | None:
    """https://cdn.jsdelivr.net/npm/<name>@<version>/<file> -> node_modules/<name>/<file>, if that very version is
    installed there; None otherwise."""
    if not url.startswith(CDN_PREFIX):
        return None
    spec, _, rest = url[len(CDN_PREFIX):].partition("/")
    name, _, version = spec.rpartition("@") if spec.startswith("@") else spec.partition("@")
    if _installed_version(node_modules, name) != version:
        return None
    path = node_modules / name / rest
    return path if path.is_file() and path.resolve().is_relative_to((node_modules / name).resolve()) else None


def copy_mathjax(node_modules: Path, dest: Path) -> None:
    """The web subset of MathJax (MATHJAX_WEB) from `node_modules` into `dest`/mathjax, as laid out in the package."""
    for part in MATHJAX_WEB:
        src, dst = node_modules / "mathjax" / part, dest / "mathjax" / part
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _installed_version(modules: Path, name: str) -> str | None:
    manifest = modules / name / "package.json"
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text(encoding="utf-8")).get("version")


if __name__ == "__main__":
    print(ensure(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PREFIX))
