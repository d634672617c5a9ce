"""Local copies of the JavaScript that the slides and the PDF edition load (reveal.js, MathJax, d3, jQuery), from npm.

A deck or a PDF must render on a classroom machine with no network, so nothing is fetched from a CDN when it is
viewed or printed: `ensure()` installs the pinned packages once into build/vendor (npm registry, like pip for PyPI)
and returns their node_modules folder; later calls reuse it. `python -m tools.course.vendor` does the same from a shell.
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
# d3 and jQuery are the versions tfm.attnviz's views load from jsDelivr (chapter 8's bertviz views, in the PDF).
PACKAGES = {"reveal.js": "5.2.1", "mathjax": "3.2.2", "d3": "5.7.0", "jquery": "2.2.4"}


def ensure(prefix: Path = DEFAULT_PREFIX, packages: dict[str, str] | None = None) -> Path:
    """Install `packages` (name -> exact version) under `prefix` unless already there; return its node_modules."""
    packages = PACKAGES if packages is None else packages
    modules = prefix / "node_modules"
    if all(_installed_version(modules, name) == version for name, version in packages.items()):
        return modules
    if shutil.which("npm") is None:
        raise RuntimeError("npm is not installed: it fetches reveal.js and MathJax once (apt-get install -y npm)")
    specs = [f"{name}@{version}" for name, version in packages.items()]
    prefix.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                             *specs], capture_output=True, text=True, timeout=600)
    missing = [f"{n}@{v}" for n, v in packages.items() if _installed_version(modules, n) != v]
    if result.returncode != 0 or missing:
        raise RuntimeError(f"npm install {' '.join(specs)} failed (missing {missing}):\n{result.stderr[-2000:]}")
    return modules


def _installed_version(modules: Path, name: str) -> str | None:
    manifest = modules / name / "package.json"
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text(encoding="utf-8")).get("version")


if __name__ == "__main__":
    print(ensure(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PREFIX))
