"""How far back chapter 14's long-context models look (`make data-sweep`, after their training): the loss by position
against modified Kneser–Ney, Olsson et al.'s in-context score, the context-swap control, an induction oracle and the
repeat test, for every seed's weights.

Usage: python -m tools.book.context_use [--weights src/tfm/checkpoints]
                                        [--out src/tfm/checkpoints/ch14_context_use.json]

The weights are the long-context runs of ``tools.book.data_sweep`` (``--length 512 --positional rotary --save``),
found by their file names. Everything is measured on the test documents of tfm.pydocs cut into consecutive windows
of 513 characters (:func:`rows`), the same windows for the Transformer and for a 12-gram fitted on the whole training
text, each scored from its own window only. The chapter recomputes seed 0's numbers on part of these windows and
reads the rest from the JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from tools import ROOT

LENGTH = 512  # the models' context
EARLY, LATE = (40, 60), (480, 512)  # positions of Olsson et al.'s score: the 500th token against the 50th
KEEPS = [0, 8, 32, 128, 448]  # context-swap: ids of the window's own text kept before the scored span
SCORED = 8  # the last 8 predictions of a window are scored
ORACLE_N = 6  # the induction oracle matches 6 characters
REPEAT_SPANS, REPEAT_LENGTH = 100, 256  # the repeat test: 100 test spans of 256 characters, each shown twice
BOOTSTRAP = 1000  # resamples of the windows, for the standard errors
FIFTHS = 5  # the gap to the count model, by fifths of the count model's own loss
WEIGHTS = re.compile(r"ch14_pydocs_d(\d+)_(\d+)layers_rotary_t512_seed(\d+)_(\d+)\.pt")


def rows():
    """The test windows every measurement uses: ``(n, LENGTH + 1)`` consecutive ids of tfm.pydocs' test text."""
    import torch

    from tfm.lm import consecutive_windows
    from tfm.pydocs import char_corpus

    x, y = consecutive_windows(char_corpus().test, LENGTH)  # (n, T) each: inputs and next ids
    return torch.cat([x, y[:, -1:]], 1)  # (n, T + 1)


def load(path: Path, width: int, n_layers: int):
    """A long-context CausalLM from its float16 weights, in float32, on the CPU."""
    import torch

    import tfm
    from tfm.pydocs import char_corpus

    model = tfm.CausalLM(char_corpus().n_vocab, d_model=width, n_heads=4, n_layers=n_layers, d_ff=4 * width,
                         dropout=0.0, max_len=LENGTH, positional="rotary")
    state = torch.load(path, map_location="cpu")
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval()


def bootstrap_se(per_window) -> float:
    """Standard error of the mean of ``per_window (n,)``, from BOOTSTRAP resamples of the windows (seeded)."""
    import torch

    g = torch.Generator().manual_seed(0)
    picks = torch.randint(0, len(per_window), (BOOTSTRAP, len(per_window)), generator=g)  # (BOOTSTRAP, n)
    return per_window.double()[picks].mean(1).std().item()


def window_scores(losses):
    """Olsson et al.'s score of each window on its own: ``losses (n, L - 1)`` -> ``(n,)``."""
    return losses[:, LATE[0]:LATE[1]].double().mean(1) - losses[:, EARLY[0]:EARLY[1]].double().mean(1)


def measure(model, windows, donors, count_losses, seed: int = 0) -> dict:
    """Every number of the record for one model on ``windows (n, L)``, with ``donors`` for the context swap;
    ``count_losses`` are the 12-gram's on the same windows, ``(n, L - 1)``."""
    import torch

    from tfm.context_use import context_swap_rows, induction_oracle, model_row_losses
    from tfm.incontext import in_context_score, loss_by_position, prefix_matching_scores
    from tfm.pydocs import char_corpus

    losses = model_row_losses(model, windows)  # (n, L - 1)
    by_position, kn_by_position = losses.mean(0), count_losses.mean(0)  # (L - 1,)
    rise_rows = context_swap_rows(lambda r: model_row_losses(model, r), windows, donors, KEEPS, SCORED)  # k: (n,)
    rise = {k: v.mean().item() for k, v in rise_rows.items()}
    paired = window_scores(losses) - window_scores(count_losses)  # (n,)
    gap = (losses - count_losses).double()  # (n, L - 1)
    edges = torch.quantile(count_losses.double().flatten(), torch.linspace(0, 1, FIFTHS + 1).double())
    fifth = torch.bucketize(count_losses.double(), edges[1:-1])  # (n, L - 1): 0 (most confident) .. 4
    fires, guess = induction_oracle(windows, ORACLE_N)  # (n, L - 1)
    right = fires & (guess == windows[:, 1:])
    test = char_corpus().test
    g = torch.Generator().manual_seed(7)
    starts = torch.randint(0, len(test) - REPEAT_LENGTH, (REPEAT_SPANS,), generator=g)
    span = test[starts[:, None] + torch.arange(REPEAT_LENGTH)]  # (100, 256)
    twice = torch.cat([span, span], 1)  # (100, 512)
    with torch.no_grad():
        repeat = loss_by_position(model, twice)  # (511,)
        _, weights = model(twice, need_weights=True)
    prefix = prefix_matching_scores(weights, REPEAT_LENGTH)  # (n_layers, h)
    return {
        "seed": seed, "test_loss": round(losses.mean().item(), 5),
        "count_test_loss": round(count_losses.mean().item(), 5),
        "icl_score": round(in_context_score(by_position, EARLY, LATE), 5),
        "count_icl_score": round(in_context_score(kn_by_position, EARLY, LATE), 5),
        "icl_score_se": round(bootstrap_se(window_scores(losses)), 5),
        "icl_minus_count": round(paired.mean().item(), 5), "icl_minus_count_se": round(bootstrap_se(paired), 5),
        "swap_rise": {str(k): round(v, 5) for k, v in rise.items()},
        "swap_rise_se": {str(k): round(bootstrap_se(v), 5) for k, v in rise_rows.items()},
        "gap_by_count_fifth": [round(gap[fifth == q].mean().item(), 4) for q in range(FIFTHS)],
        "gap_where_oracle_silent": round(gap[~fires].mean().item(), 5),
        "oracle_fires": round(fires.double().mean().item(), 5),
        "oracle_right": round((right.sum() / fires.sum()).item(), 5),
        "loss_where_fires": round(losses[fires].double().mean().item(), 5),
        "count_loss_where_fires": round(count_losses[fires].double().mean().item(), 5),
        "loss_where_right": round(losses[right].double().mean().item(), 5),
        "count_loss_where_right": round(count_losses[right].double().mean().item(), 5),
        "repeat_first": round(repeat[: REPEAT_LENGTH - 1].mean().item(), 5),
        "repeat_second": round(repeat[REPEAT_LENGTH:].mean().item(), 5),
        "best_prefix_score": round(prefix.max().item(), 5),
        "by_position": [round(v, 4) for v in by_position.tolist()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    checkpoints = ROOT / "src" / "tfm" / "checkpoints"
    parser.add_argument("--weights", type=Path, default=checkpoints)
    parser.add_argument("--out", type=Path, default=checkpoints / "ch14_context_use.json")
    args = parser.parse_args(argv)
    import torch

    from tfm.context_use import context_swap_rise
    from tfm.kneser_ney import ModifiedKneserNey
    from tfm.pydocs import char_corpus
    from tools.book.notebooks import use_book_environment

    use_book_environment()
    torch.set_num_threads(1)
    found = sorted((int(m[3]), m[0], int(m[1]), int(m[2])) for p in args.weights.iterdir()
                   if (m := WEIGHTS.fullmatch(p.name)))
    if not found:
        raise SystemExit(f"no long-context weights (names like ch14_pydocs_d64_2layers_rotary_t512_seed0_N.pt) "
                         f"in {args.weights}")
    start = time.perf_counter()
    corpus = char_corpus()
    windows = rows()  # (n, 513)
    mkn = ModifiedKneserNey(12, corpus.n_vocab).fit(corpus.train)
    count_losses = mkn.row_losses(windows).float()  # (n, 512)
    donors = windows.roll(len(windows) // 2, 0)  # text of other documents
    count_rise = {str(k): round(v, 5) for k, v in context_swap_rise(mkn.row_losses, windows, donors, KEEPS,
                                                                    SCORED).items()}
    runs = [measure(load(args.weights / name, width, n_layers), windows, donors, count_losses, seed)
            for seed, name, width, n_layers in found]
    record = {"recipe": {"windows": len(windows), "length": LENGTH, "early": EARLY, "late": LATE, "keeps": KEEPS,
                         "scored": SCORED, "oracle_n": ORACLE_N, "repeat": [REPEAT_SPANS, REPEAT_LENGTH],
                         "count_model": "modified Kneser-Ney 12-gram on the whole training text",
                         "weights": [name for _, name, _, _ in found], "torch": torch.__version__,
                         "command": " ".join(["python -m tools.book.context_use", *(sys.argv[1:] if argv is None
                                                                                   else argv)]),
                         "seconds": round(time.perf_counter() - start, 1)},
              "count_swap_rise": count_rise,
              "count_by_position": [round(v, 4) for v in count_losses.mean(0).tolist()], "runs": runs}
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(runs)} models, {record['recipe']['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
