"""Chapter 13's pretraining, run longer: what 250 steps leave out (`make pretraining-budget`).

Usage: python -m tools.book.pretraining_budget [--seeds 5] [--steps 3000]
                                               [--out src/tfm/checkpoints/ch13_budget.json]

For each seed, the chapter's masked LM (the same data, sizes, optimiser and schedule) is pretrained for ``--steps``
steps twice: with the chapter's local attention (radius 1) and with full attention. Every 250 steps the held-out
loss at ``[MASK]`` positions is recorded under the chapter's fixed masking, beside the unigram and bigram count
models'. At the end, both encoders are read by the chapter's linear probe (96 labels per part) and fine-tuned as the
chapter's "pretrained" arm at 96 labels per part, beside a randomly initialised encoder (the probe's control, and
the scratch arm). The schedule decays to zero at ``--steps``, so a point of the curve at step s is not a run of s
steps: the chapter quotes the curves as curves. The chapter reads the JSON; it never trains this long.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from tools import ROOT

EVAL_EVERY = 250
RADII = {"local": 1, "full": None}  # the two arms: attention radius 1, and no band


def setup():
    """The chapter's data: its task, its 200-merge BPE, windows of 48 tokens, held-out windows, subsets and sizes."""
    import torch

    import tfm
    import tfm.bpe
    import tfm.corpus
    import tfm.pretraining as pt

    task = tfm.corpus.sentence_task(test_per_label=50)
    bpe = tfm.bpe.train_bpe(tfm.bpe.word_counts(task.pretraining_text), n_merges=200)
    pad, cls, mask = (bpe.id_of(t) for t in ("[PAD]", "[CLS]", "[MASK]"))
    first, length = len(bpe.special_tokens), 48
    windows = [w for p in task.pretraining_text for w in pt.windows(bpe.encode(p), length, cls)]
    held_paragraphs = [tfm.corpus.paragraphs()[i] for i in sorted(set(task.test.paragraph_ids))]
    held_out = [w for p in held_paragraphs for w in pt.windows(bpe.encode(p), length, cls)]
    y_train, y_test = torch.tensor(task.train.labels), torch.tensor(task.test.labels)
    order = tfm.generator(0)
    orders = []
    for c in range(len(tfm.corpus.LABELS)):
        in_part = torch.nonzero(y_train == c).flatten()
        orders.append(in_part[torch.randperm(len(in_part), generator=order)])
    rows = torch.cat([o[:96] for o in orders])  # the chapter's subset(96)

    def batch(sentences):
        return tfm.data.pad([[cls] + bpe.encode(s)[:length - 1] for s in sentences], pad)  # (B, <= 48)

    sizes = dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0, max_len=length, pad_id=pad,
                 norm_first=True)
    counts = pt.CountBaselines(windows, len(bpe), first)
    ids = tfm.data.pad(held_out, pad)  # (held-out windows, 48)
    inputs, targets = pt.mask_tokens(ids, mask, first, len(bpe), generator=tfm.generator(12345))
    kinds = pt.position_kinds(ids, inputs, targets, mask)
    baseline = {name: pt.mean_by_kind(losses, kinds)["[MASK]"]
                for name, losses in counts.losses(inputs, targets, mask).items()}
    return dict(task=task, bpe=bpe, pad=pad, mask=mask, first=first, windows=windows, held_out=held_out,
                y_train=y_train, y_test=y_test, rows=rows, batch=batch, sizes=sizes, baseline=baseline)


def readouts(data: dict, mlm, seed: int, scratch: bool = False) -> dict[str, float]:
    """The chapter's linear probe and its fine-tuning at 96 labels per part, for one encoder. With ``scratch``, the
    fine-tuned classifier is the chapter's scratch arm (built from scratch with ``mlm``'s sizes), not a copy of
    ``mlm``'s random weights."""
    import torch
    from sklearn.linear_model import LogisticRegression

    import tfm
    import tfm.pretraining as pt

    task, rows, batch, pad = data["task"], data["rows"], data["batch"], data["pad"]
    x_train = batch([task.train.sentences[i] for i in rows])
    x_test = batch(task.test.sentences)
    with torch.no_grad():
        mlm.eval()
        train_features = tfm.model.mean_pool(mlm.encode(x_train), x_train != pad).numpy()  # (384, 64)
        test_features = tfm.model.mean_pool(mlm.encode(x_test), x_test != pad).numpy()  # (203, 64)
    probe = LogisticRegression(max_iter=2000).fit(train_features, data["y_train"][rows].numpy())
    tfm.seed_everything(seed)
    if scratch:  # as the chapter's train_tfm(None, ...)
        classifier = pt.classifier_from(None, 4, pooling="mean", **mlm.sizes)
    else:
        classifier = pt.classifier_from(mlm, 4, pooling="mean")
    pt.fine_tune(classifier, (x_train,), data["y_train"][rows], steps=60, lr=1e-3, batch_size=16, seed=seed)
    return {"probe": float(probe.score(test_features, data["y_test"].numpy())),
            "fine-tuned, 96 labels per part": pt.accuracy(classifier, (x_test,), data["y_test"])}


def run(seed: int, steps: int) -> dict:
    import torch

    import tfm
    import tfm.pretraining as pt

    torch.set_num_threads(1)
    data = setup()
    record = {"seed": seed, "baseline [MASK]": data["baseline"]}
    tfm.seed_everything(seed)
    random_mlm = pt.MaskedLM(len(data["bpe"]), **data["sizes"], attention_radius=1)
    record["random encoder"] = readouts(data, random_mlm, seed, scratch=True)
    for arm, radius in RADII.items():
        tfm.seed_everything(seed)
        mlm = pt.MaskedLM(len(data["bpe"]), **data["sizes"], attention_radius=radius)
        start = time.perf_counter()
        history = pt.pretrain_mlm(mlm, data["windows"], steps=steps, mask_id=data["mask"],
                                  first_normal_id=data["first"], batch_size=64, lr=2e-3, warmup=50, seed=seed,
                                  held_out=data["held_out"], eval_every=EVAL_EVERY)
        record[arm] = {"[MASK] loss": history["eval_by_kind"]["[MASK]"],
                       "seconds": round(time.perf_counter() - start, 1),
                       **readouts(data, mlm, seed)}
        print(f"seed {seed} {arm}: {record[arm]['[MASK] loss'][-1]:.3f} nats at [MASK] after {steps} steps",
              file=sys.stderr)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=ROOT / "src/tfm/checkpoints/ch13_budget.json")
    parser.add_argument("--seed", type=int, help="run one seed and print its record (used by the parallel runs)")
    args = parser.parse_args()
    if args.steps < EVAL_EVERY or args.steps % EVAL_EVERY:
        raise SystemExit(f"--steps must be a positive multiple of {EVAL_EVERY}, got {args.steps}")
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be at least 1, got {args.seeds}")
    if args.seed is not None:
        print(json.dumps(run(args.seed, args.steps)))
        return
    import subprocess

    workers = [subprocess.Popen([sys.executable, "-m", "tools.book.pretraining_budget", "--steps", str(args.steps),
                                 "--seed", str(seed)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
               for seed in range(args.seeds)]
    records = []
    for worker in workers:
        out, _ = worker.communicate()
        if worker.returncode:
            raise SystemExit(f"a seed failed (exit {worker.returncode})")
        records.append(json.loads(out))
    steps = list(range(0, args.steps + 1, EVAL_EVERY))
    # the evaluation runs at step 0 and every EVAL_EVERY steps after
    assert all(len(r[arm]["[MASK] loss"]) == len(steps) for r in records for arm in RADII), "curve length"
    result = {"made by": "python -m tools.book.pretraining_budget "
                         f"--seeds {args.seeds} --steps {args.steps}",
              "steps": steps, "uniform": math.log(len(setup()["bpe"]) - 5), "runs": records}
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    shown = args.out.resolve()
    print(f"wrote {shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown}")


if __name__ == "__main__":
    main()
