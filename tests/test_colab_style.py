"""Every chapter runs as Colab would run it: alone in an empty folder, with tfm installed from a built wheel (not the
editable checkout), so no notebook depends on the repository's layout. Markdown images must work in Colab too."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))

RUNNER = textwrap.dedent("""
    import sys, nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    path = sys.argv[1]
    nb = nbformat.read(path, as_version=4)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
    except CellExecutionError as error:
        print(str(error)[:3000])
        sys.exit(1)
""")


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    """A virtual environment that sees .venv's packages (torch, jupyter, ...) but gets tfm from a wheel."""
    base = tmp_path_factory.mktemp("colab")
    wheels, source = base / "wheels", base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "src"):  # build from a copy: no build/ in the checkout
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
                   check=True)
    env_dir = base / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # .venv's site-packages as a plain path: its editable-install .pth hook is not processed from there
    (site / "shared_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("tfm-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True)
    where = subprocess.run([python, "-c", "import tfm; print(tfm.__file__)"], capture_output=True, text=True,
                           check=True, cwd=base).stdout.strip()
    assert str(site) in where and str(ROOT / "src") not in where, f"tfm imported from {where}, not the wheel"
    return python, base


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_alone_with_tfm_from_a_wheel(path, wheel_env):
    python, base = wheel_env
    folder = base / path.stem
    folder.mkdir()
    shutil.copy(path, folder / path.name)
    env = {**os.environ, "PYTHONPATH": "", "HF_HUB_OFFLINE": "1", "TFM_DEVICE": "cpu", "TFM_PROGRESS": "0"}
    result = subprocess.run([python, "-c", RUNNER, path.name], cwd=folder, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{path.name} fails outside the repository:\n{result.stdout}{result.stderr[-2000:]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_images_show_in_colab_and_on_the_website(path):
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        targets = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", text) + re.findall(r"<img[^>]+src=[\"']([^\"']+)", text)
        targets += re.findall(r"```\{(?:image|figure)\}\s+(\S+)", text)
        for target in targets:
            assert target.startswith(("attachment:", "https://", "data:")), (
                f"{path.name}, markdown cell {i}: image {target!r} is a local path, which Colab cannot show; "
                "draw the figure in a code cell or attach it to the cell"
            )
