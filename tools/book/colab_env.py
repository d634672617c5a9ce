"""Prepare the notebooks to run as Colab runs them: alone in an empty folder, with tfm installed from a built wheel.

Usage: python -m tools.book.colab_env FOLDER   (`make notebooks` runs strict nbval on FOLDER/chapters/*.ipynb with
FOLDER/env/bin/python, so the one execution that checks the stored outputs also proves that no notebook depends on
the repository's layout or on the editable install.)

FOLDER/env is a virtual environment that sees this environment's packages (torch, jupyter, ...) but gets tfm from a
wheel built from a copy of the sources; FOLDER/chapters holds copies of the notebooks and nothing else.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from tools import ROOT


def build(folder: Path) -> Path:
    """Create ``folder``/env and ``folder``/chapters afresh; return the environment's python."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        source, wheels = Path(scratch) / "source", Path(scratch) / "wheels"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE", "src"):  # build from a copy: no build/ in the checkout
            (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, source / name)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
                       check=True)
        env = folder / "env"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
        python = env / "bin" / "python"
        site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        # this environment's site-packages as a plain path: its editable-install .pth hook is not processed from there
        (site / "shared_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        wheel = next(wheels.glob("tfm-*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                       check=True)
    chapters = folder / "chapters"
    chapters.mkdir()
    for notebook in sorted((ROOT / "chapters").glob("*.ipynb")):
        shutil.copy(notebook, chapters / notebook.name)
    where = subprocess.run([python, "-c", "import tfm; print(tfm.__file__)"], capture_output=True, text=True,
                           check=True, cwd=chapters, env={"PATH": "/usr/bin:/bin"}).stdout.strip()
    if str(site) not in where or str(ROOT / "src") in where:
        raise SystemExit(f"tfm imported from {where}, not from the wheel in {site}")
    return python


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(build(Path(sys.argv[1]).resolve()))
