"""Loss against distinct training text (`make data-sweep`): a Transformer and modified Kneser–Ney on growing prefixes
of the Python documentation (tfm.pydocs), the experiment behind "why neural language models won".

Usage: python -m tools.book.data_sweep [--width 64] [--layers 2] [--steps 2440] [--seeds 0 1 2] [--jobs 1]
                                       [--device cpu] [--out src/tfm/checkpoints/ch14_data.json] [--quick]
       python -m tools.book.data_sweep --widths 16 24 32 128 --out src/tfm/checkpoints/ch14_sizes.json

Each training text is a prefix of tfm.pydocs' training documents (in its fixed shuffled order, so a smaller text is
part of every larger one): the whole training text divided by 64, 16, 4 and 1. On each:

- modified Kneser–Ney of orders 6, 8, 10 and 12 (tfm.kneser_ney), fitted on that text only and scored on the test
  documents' windows of LENGTH characters, from the window's own characters (as the Transformer sees them);
- a tfm.CausalLM (4 heads, d_ff = 4 d_model, no dropout, learned positions unless --positional rotary) per seed,
  trained for the same number of steps of BATCH random windows whatever the text's size, with AdamW and a one-cycle
  schedule; the validation documents' loss is measured 20 times and the run keeps its best weights (early stopping:
  on a small text the Transformer begins to memorise long before its steps end). Its test loss is measured with
  those weights.

With ``--widths``, the plan is loss against size instead: one run per width and seed on the whole training text, the
recipe otherwise the same (so the data sweep's runs on the whole text are that plan's points at ``--width``).

The JSON records, per run, the device, the seconds it took, the steps, the characters it read and how many passes
over its training text that is (``epochs``: above 1, the text was repeated), the step it stopped at and its curve.
Runs go side by side, one thread each (``--jobs``); on a GPU several processes share it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tools import ROOT

LENGTH, BATCH, LR, N_HEADS = 256, 16, 3e-3, 4
DIVISORS = [64, 16, 4, 1]  # the training texts: the whole training text divided by these
ORDERS = [6, 8, 10, 12]
MEASUREMENTS = 20


def train_one(n_chars: int, width: int, n_layers: int, steps: int, seed: int, device: str, length: int = LENGTH,
              save: str | None = None, batch: int = BATCH, positional: str = "learned") -> dict:
    """One Transformer run in a fresh process (one CPU thread); its best weights go to ``save`` (float16) if given."""
    import torch

    torch.set_num_threads(1)
    import tfm
    from tfm.lm import held_out_loss, train_on_stream
    from tfm.pydocs import char_corpus

    corpus = char_corpus()
    tfm.seed_everything(seed)
    model = tfm.CausalLM(corpus.n_vocab, d_model=width, n_heads=N_HEADS, n_layers=n_layers, d_ff=4 * width,
                         dropout=0.0, max_len=length, positional=positional).to(device)
    start = time.perf_counter()
    history = train_on_stream(model, corpus.training_subset(n_chars), corpus.validation, steps, length=length,
                              batch=batch, lr=LR, generator=tfm.generator(seed), eval_every=steps // MEASUREMENTS,
                              keep_best=True)
    seconds = time.perf_counter() - start
    test_loss, _ = held_out_loss(model, corpus.test, length)
    read = steps * batch * length
    if save is not None:
        torch.save({k: v.half().cpu() for k, v in model.state_dict().items()}, save)
    return {"n_chars": n_chars, "seed": seed, "d_model": width, "n_layers": n_layers, "length": length, "batch": batch,
            "positional": positional, "steps": steps,
            "chars_read": read, "epochs": round(read / n_chars, 2), "best_step": history["best_step"],
            "test_loss": round(test_loss, 5), "eval_step": history["eval_step"],
            "validation_loss": [round(v, 5) for v in history["eval_loss"]], "seconds": round(seconds, 1),
            "device": _device_name(device)}


def count_models(n_chars: int, length: int = LENGTH) -> dict:
    """Modified Kneser–Ney of every order in ORDERS on one training text: test loss (nats per character)."""
    from tfm.kneser_ney import ModifiedKneserNey
    from tfm.pydocs import char_corpus

    corpus = char_corpus()
    text = corpus.training_subset(n_chars)
    return {"n_chars": n_chars, "test_loss": {
        str(order): round(ModifiedKneserNey(order, corpus.n_vocab).fit(text).window_losses(
            corpus.test, length).mean().item(), 5) for order in ORDERS}}


def _device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}), 1 thread"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2440, help="steps of every run (2,440: 10 M characters)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1, help="runs side by side, one thread each")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "tfm" / "checkpoints" / "ch14_data.json")
    parser.add_argument("--widths", type=int, nargs="+", help="loss against size: these widths, whole text only")
    parser.add_argument("--length", type=int, default=LENGTH, help="the context, in characters")
    parser.add_argument("--batch", type=int, default=BATCH, help="windows per step")
    parser.add_argument("--positional", default="learned", choices=["learned", "rotary"])
    parser.add_argument("--save", type=Path, help="a folder: each run's best weights go there (float16)")
    parser.add_argument("--quick", action="store_true", help="two small texts, 40 steps, one seed: a smoke test")
    args = parser.parse_args(argv)
    if args.steps < MEASUREMENTS:
        parser.error(f"--steps must be at least {MEASUREMENTS} (the validation loss is measured {MEASUREMENTS} times)")
    import torch

    from tfm.pydocs import char_corpus
    from tools.book.notebooks import use_book_environment

    use_book_environment()
    total = len(char_corpus().train)
    divisors, steps, seeds = ([256, 64], 40, args.seeds[:1]) if args.quick else (DIVISORS, args.steps, args.seeds)
    sizes = [total // d for d in divisors]
    widths = args.widths or [args.width]
    if args.widths:
        sizes = [total]

    def weights_file(w: int, s: int, n: int) -> str | None:
        if args.save is None:
            return None
        return str(args.save / f"ch14_pydocs_d{w}_{args.layers}layers_{args.positional}_t{args.length}_seed{s}_{n}.pt")

    plan = [(n, w, args.layers, steps, s, args.device, args.length, weights_file(w, s, n), args.batch,
             args.positional)
            for n in sizes for w in widths for s in seeds]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        counts = list(pool.map(count_models, sizes, [args.length] * len(sizes)))
        runs = list(pool.map(train_one, *zip(*plan, strict=True)))
    recipe = {"corpus": "tfm.pydocs (characters, spaces included)", "length": args.length, "batch": args.batch,
              "positional": args.positional, "lr": LR,
              "n_heads": N_HEADS, "d_model": args.widths or args.width, "n_layers": args.layers, "d_ff": "4 d_model",
              "dropout": 0.0, "weight_decay": 0.1, "warmup": 0.1, "steps": steps, "measurements": MEASUREMENTS,
              "early_stopping": "best validation loss", "torch": torch.__version__,
              "command": "python -m tools.book.data_sweep " + " ".join(sys.argv[1:] if argv is None else argv),
              "seconds": round(time.perf_counter() - start, 1), "jobs": args.jobs}
    args.out.write_text(json.dumps({"recipe": recipe, "count_models": counts, "runs": runs}, indent=1) + "\n",
                        encoding="utf-8")
    print(f"wrote {args.out} ({len(runs)} runs, {recipe['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
