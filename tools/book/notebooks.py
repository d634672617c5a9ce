"""What the tools share about running the book's notebooks: the list, each chapter's time budget, and one execution.

Used by `execute_notebooks.py` (`make execute`), `time_chapters.py` (`make bench`) and `robustness.py`
(`make robustness`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tools import ROOT

CHAPTERS = ROOT / "chapters"
KERNEL = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

# Seconds each chapter may take to execute top to bottom on the 2-core reference CPU (the book's plan). Checked by
# `make bench`, never inside a notebook: a learner's slower laptop is not an error.
BUDGETS = {
    "01_attention_token_by_token": 30,
    "02_attention_as_matrices": 60,
    "03_multi_head_attention": 60,
    "04_masking": 60,
    "05_positional_encoding": 60,
    "06_transformer_block": 90,
    "07_encoder_decoder": 90,
    "08_inside_bert": 60,
    "09_decoder_only": 90,
    "10_vision_transformer": 60,
    "11_cost_of_attention": 60,
    "12_tokens": 75,
    "13_pretraining_and_fine_tuning": 75,
    "14_language_model_of_real_text": 75,
    "15_todays_decoder_block": 75,
    "16_training_beyond_one_device": 75,
}
BOOK_BUDGET = 615  # seconds for the whole book, executed once: 240 for chapters 1-11, plus 75 for each of 12 to 16

# The environment the stored outputs are produced in: CPU, offline, no progress bars. Set here, not only in the
# Makefile, so that the tools give the same outputs however they are started.
ENVIRONMENT = {
    "TFM_DEVICE": "cpu",
    "TFM_PROGRESS": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


FIGURE_EXTENSIONS = ["tools.book.figure_text"]  # loaded into every kernel that execute() starts


def notebooks() -> list[Path]:
    return sorted(CHAPTERS.glob("*.ipynb"))


def use_book_environment() -> None:
    """Set :data:`ENVIRONMENT` for the kernels this process starts (they inherit ``os.environ``)."""
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def execute(nb: nbformat.NotebookNode, folder: Path, timeout: int = 600, allow_errors: bool = False) -> float:
    """Run ``nb`` in place with ``folder`` as its working directory; return the seconds it took."""
    use_book_environment()
    nb.metadata["kernelspec"] = KERNEL
    # Each figure is stored with the size of its smallest text (tools/book/figure_text.py), read by the tests.
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths if str(ROOT) in paths else [str(ROOT), *paths])
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False, coalesce_streams=True,
                            allow_errors=allow_errors, resources={"metadata": {"path": str(folder)}},
                            extra_arguments=[f"--IPKernelApp.extensions={FIGURE_EXTENSIONS!r}"])
    started = time.perf_counter()
    client.execute()
    return time.perf_counter() - started
