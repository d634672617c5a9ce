"""Chapter 14's longer training runs (`make scaling`): the checkpoints it loads and the table of loss against size.

Usage: python -m tools.book.scaling [--jobs 1] [--out src/tfm/checkpoints]

Every run is tfm.lm.train_lm on tfm.lm.corpus_lm(n_merges) (chapter 12's split and BPE) with tfm.CausalLM, 4 heads,
d_ff = 4 d_model, dropout 0.1, windows of 128 tokens, batches of 32, AdamW at 3e-3 with a one-cycle schedule; seed k
seeds the weights with tfm.seed_everything(k) and the batches with tfm.generator(k). Two sets of runs:

- checkpoints: characters (n_merges = 0), 4,000 steps, 3 seeds, a 2-layer model at d_model = 96 and a 1-layer
  control at d_model = 64. Seed 0's weights are written in half precision (ch14_chars_d96_2layers.pt,
  ch14_chars_d64_1layer.pt) and every seed's held-out curve to ch14_runs.json;
- sizes: 2-layer models at d_model = 48, 64, 96 and 128, 2,000 steps, 5 seeds, on characters and on BPE with 250
  merges; the final held-out losses go to ch14_scaling.json. Chapter 14 no longer fits them (its loss against size
  comes from `make data-sweep`, on the larger text); it cites the table for characters against subwords.

The files in the repository were made on one NVIDIA H100 (CUDA, float32, 14 runs side by side, about 9 minutes), with
a condensed copy of this code path (the same corpus, windows, span-free batches, optimiser, schedule and evaluation,
checked to give the same losses as train_lm on the CPU); the runs at d_model = 16, 24 and 32 of that sweep did not end
within its time and are not in the table. On a CPU, one thread per run, the whole plan takes several hours; other
devices give other bits and losses within the spread of the seeds.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tools import ROOT

RECIPE = {"length": 128, "batch": 32, "lr": 3e-3, "n_heads": 4, "dropout": 0.1}
CHECKPOINTS = [(96, 2, "ch14_chars_d96_2layers.pt"), (64, 1, "ch14_chars_d64_1layer.pt")]  # d_model, layers, file
CHECKPOINT_STEPS, CHECKPOINT_SEEDS = 4000, 3
SIZE_WIDTHS, SIZE_MERGES, SIZE_STEPS, SIZE_SEEDS = [48, 64, 96, 128], [0, 250], 2000, 5


def train_one(n_merges: int, width: int, n_layers: int, steps: int, seed: int, out: str | None) -> dict:
    """One run in a fresh process (one thread); writes the half-precision weights to ``out`` if given."""
    import torch

    torch.set_num_threads(1)
    import tfm
    from tfm.lm import corpus_lm, train_lm

    data = corpus_lm(n_merges)
    tfm.seed_everything(seed)
    model = tfm.CausalLM(data.n_vocab, d_model=width, n_heads=RECIPE["n_heads"], n_layers=n_layers, d_ff=4 * width,
                         dropout=RECIPE["dropout"], max_len=RECIPE["length"]).to(tfm.get_device())
    history = train_lm(model, data, steps, length=RECIPE["length"], batch=RECIPE["batch"], lr=RECIPE["lr"],
                       generator=tfm.generator(seed), eval_every=steps // 10)
    if out is not None:
        torch.save({k: v.half().cpu() for k, v in model.state_dict().items()}, out)
    return {"n_merges": n_merges, "d_model": width, "n_layers": n_layers, "seed": seed, "steps": steps,
            "eval_step": history["eval_step"], "eval_loss": [round(v, 5) for v in history["eval_loss"]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1, help="runs side by side, one thread each")
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "tfm" / "checkpoints")
    args = parser.parse_args()
    from tools.book.notebooks import use_book_environment

    use_book_environment()
    plan = [(0, w, layers, CHECKPOINT_STEPS, s, str(args.out / name) if s == 0 else None)
            for w, layers, name in CHECKPOINTS for s in range(CHECKPOINT_SEEDS)]
    plan += [(m, w, 2, SIZE_STEPS, s, None) for m in SIZE_MERGES for w in SIZE_WIDTHS for s in range(SIZE_SEEDS)]
    with ProcessPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(train_one, *zip(*plan, strict=True)))
    recipe = dict(RECIPE, weight_decay=0.1, warmup=0.1, d_ff="4 d_model", n_merges=0, steps=CHECKPOINT_STEPS,
                  repeat_share=0.0)
    kept = [{k: r[k] for k in ("d_model", "n_layers", "seed", "steps", "eval_step", "eval_loss")}
            for r in runs if r["steps"] == CHECKPOINT_STEPS]
    (args.out / "ch14_runs.json").write_text(json.dumps({"recipe": recipe, "device": "as run", "runs": kept},
                                                        indent=1), encoding="utf-8")
    sizes = [{"n_merges": r["n_merges"], "d_model": r["d_model"], "seed": r["seed"], "loss": r["eval_loss"][-1]}
             for r in runs if r["steps"] == SIZE_STEPS]
    (args.out / "ch14_scaling.json").write_text(json.dumps(
        {"recipe": dict(recipe, steps=SIZE_STEPS, n_layers=2), "device": "as run", "runs": sizes}, indent=1),
        encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
