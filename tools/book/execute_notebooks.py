"""Re-execute notebooks in place so that their stored outputs are fresh, and report each one's time.

Usage: python -m tools.book.execute_notebooks chapters/01_*.ipynb [...]   (`make execute`)

The kernels run in the book's environment (CPU, offline, no progress bars: `notebooks.ENVIRONMENT`), however this
script is started. Timing metadata is not stored, so re-running an unchanged notebook leaves its file unchanged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from tools.book.notebooks import execute


def execute_in_place(path: Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    seconds = execute(nb, path.parent, timeout)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    nbformat.write(nb, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    args = parser.parse_args()
    for path in args.notebooks:
        seconds = execute_in_place(path, args.timeout)
        print(f"{seconds:7.1f} s  {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
