"""Chapter 15's block comparison over a grid of learning rates (`make block-sweep`).

Usage: python -m tools.book.block_sweep [--seeds 5] [--jobs 2]
                                        [--out src/tfm/checkpoints/ch15_block_sweep.json]

Each model of the chapter's section 9 (the 2017 block, the 2017 block with rotary positions, today's block, today's
block with learned positions, today's block with GELU) is trained with the chapter's own `train` (300 steps, the same
batches for every model) at every peak learning rate of a grid spaced by √2, from each of ``--seeds`` seeds, and its
final held-out loss is recorded. The models, the data and `train` are read from the chapter's cells, so the record is
made by the code the chapter shows. The chapter picks one rate per model from the record (the lowest mean over the
seeds), checks that no best rate lies on the grid's edge, and trains each model once, live, at that rate.
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tools import ROOT

CHAPTER = ROOT / "chapters" / "15_todays_decoder_block.ipynb"
# 5e-4 · √2^k: from 5e-4 to 2.26e-2
GRID = [round(5e-4 * 2 ** (k / 2), 6) for k in range(12)]
# the record's names -> the chapter's functions that build each model
MODELS = {"2017 block": "block_2017", "2017 block, rotary positions": "block_2017_rotary",
          "today's block": "block_today", "today's, learned positions": "today_with_learned_positions",
          "today's, GELU instead of SwiGLU": "today_with_gelu"}
CELLS = ("ch15-039", "ch15-040", "ch15-042")  # the data and builders; train; the variants


def chapter_namespace() -> dict:
    """The chapter's imports, its data and builders, and its `train`, run on the CPU (one thread)."""
    import nbformat
    import torch

    torch.set_num_threads(1)
    nb = nbformat.read(CHAPTER, as_version=4)
    cells = {cell.get("id"): cell.source for cell in nb.cells}
    namespace: dict = {"__name__": "chapter15"}
    exec("import tfm\nimport math\nfrom torch import nn\ndevice = 'cpu'", namespace)
    imports = next(c.source for c in nb.cells if c.cell_type == "code" and "from tfm.modern import" in c.source)
    exec(imports, namespace)
    for key in CELLS:
        tree = ast.parse(cells[key])
        if key == "ch15-039":  # the data, the sizes and the builders: the whole cell
            nodes = tree.body
        else:  # only the definitions (and the constants they read), not the trainings
            nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)
                     or (isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper()
                                                           for t in n.targets))]
        code = "\n\n".join(ast.get_source_segment(cells[key], n) for n in nodes)
        exec(compile(code, f"<chapter 15 cell {key}>", "exec"), namespace)
    return namespace


_namespace: dict | None = None


def one_run(model: str, lr: float, seed: int) -> tuple[str, float, int, float]:
    global _namespace
    if _namespace is None:
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):  # the cell's prints
            _namespace = chapter_namespace()
    history = _namespace["train"](_namespace[MODELS[model]], lr, seed)
    return model, lr, seed, float(history["eval_loss"][-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "src/tfm/checkpoints/ch15_block_sweep.json")
    args = parser.parse_args()
    if args.seeds < 2 or args.jobs < 1:
        raise SystemExit(f"need --seeds >= 2 (a mean and a spread) and --jobs >= 1, got {args.seeds}, {args.jobs}")
    jobs = [(model, lr, seed) for model in MODELS for lr in GRID for seed in range(args.seeds)]
    finals: dict[str, dict[str, list[float]]] = {m: {str(lr): [0.0] * args.seeds for lr in GRID} for m in MODELS}
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        for k, (model, lr, seed, loss) in enumerate(pool.map(one_run, *zip(*jobs, strict=True)), 1):
            finals[model][str(lr)][seed] = loss
            if k % 20 == 0:
                print(f"{k}/{len(jobs)} runs, {time.perf_counter() - start:.0f} s", flush=True)
    record = {"made by": f"python -m tools.book.block_sweep --seeds {args.seeds}",
              "rates": GRID, "seeds": args.seeds, "final held-out loss": finals}
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT)} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
