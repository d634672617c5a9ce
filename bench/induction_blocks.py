"""Does an induction head form? Chapter 9's block against chapter 15's, trained to copy the same way (chapter 14).

Usage: python bench/induction_blocks.py [--seeds 3] [--steps 1500]

Both models have 2 layers of 4 heads, d_model = 64, d_ff = 128, no dropout, and are trained by
tfm.incontext.train_to_copy (sequences of 64 random tokens from 64 symbols, a span of 8 to 32 repeated; AdamW at
3e-3, batches of 32), seed k for weights and batches. Chapter 9's block is tfm.CausalLM (learned absolute positions,
LayerNorm, GELU); chapter 15's is tfm.modern.ModernLM (rotary positions inside attention, RMSNorm, SwiGLU). The table
gives, per run, the first step at which the loss on the repeat test's second copy fell below 2 nats (ln 64 = 4.16
is a guess) and the final loss and best prefix-matching score. Printed, not asserted: chapter 14 quotes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import tfm  # noqa: E402
from tfm.incontext import train_to_copy  # noqa: E402
from tfm.modern import ModernConfig, ModernLM  # noqa: E402

N_VOCAB = 64


def build(block: str) -> torch.nn.Module:
    if block == "chapter 9 (learned positions)":
        return tfm.CausalLM(N_VOCAB, d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.0, max_len=64)
    return ModernLM(ModernConfig(n_vocab=N_VOCAB, d_model=64, n_layers=2, n_heads=4, n_kv_heads=4, d_ff=128,
                                 max_len=64))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| block | seed | second copy below 2 nats at step | final second copy (nats) | best prefix score |\n"
          "| --- | ---: | ---: | ---: | ---: |")
    for block in ("chapter 9 (learned positions)", "chapter 15 (rotary positions)"):
        for seed in range(args.seeds):
            tfm.seed_everything(seed)
            model = build(block)
            history = train_to_copy(model, N_VOCAB, args.steps, generator=tfm.generator(seed))
            formed = next((s for s, loss in zip(history["eval_step"], history["second"], strict=True) if loss < 2.0),
                          None)
            print(f"| {block} | {seed} | {formed or 'never'} | {history['second'][-1]:.2f} | "
                  f"{history['prefix'][-1]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
