"""Notebooks as Colab shows them. `make notebooks` runs every chapter as Colab would (alone in an empty folder, tfm from
a built wheel: tools/book/colab_env.py) under strict nbval; here, markdown images must work in Colab too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


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
