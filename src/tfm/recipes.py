"""Recipes shared by chapters: a complete, seeded training run that another chapter can reuse instead of repeating.

Chapter 7 builds the date translator's training step by step and checks it against :func:`train_date_translator`;
chapter 8 calls :func:`train_date_translator` to get the same kind of model for its attention views.
"""

from __future__ import annotations

import torch

from .data import Vocab, make_batch, random_batches
from .decoding import greedy_decode
from .device import generator, seed_everything
from .model import EncoderDecoder, TransformerConfig
from .training import LabelSmoothingLoss, noam_rate, train

Pairs = list[tuple[list[str], list[str]]]


def date_translator_config(src_vocab: Vocab, tgt_vocab: Vocab) -> TransformerConfig:
    """Chapter 7's model: d_model 64, 4 heads, 2 + 2 layers, d_ff 128, no dropout, output tied to the target
    embedding."""
    return TransformerConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), d_model=64, n_heads=4,
                             n_encoder_layers=2, n_decoder_layers=2, d_ff=128, dropout=0.0, max_len=32,
                             pad_id=src_vocab.pad_id, tie_output=True)


def faded_noam_rate(step: int, steps: int, warmup: int, d_model: int = 64, ramp: bool = True) -> float:
    """Chapter 7's learning rate at optimiser step ``step`` (0-based): §5.3's warm-up schedule times a factor that
    falls in a straight line from 1 (at the end of the warm-up) to 0 (at the last step). ``ramp=False`` starts at the
    schedule's peak instead of rising to it (no warm-up)."""
    if not 1 <= warmup < steps:
        raise ValueError(f"need 1 <= warmup < steps, got warmup={warmup}, steps={steps}")
    return noam_rate(step + 1 if ramp else max(step + 1, warmup), d_model, warmup) * min(
        1.0, (steps - step) / (steps - warmup))


def train_date_translator(train_pairs: Pairs, src_vocab: Vocab, tgt_vocab: Vocab, *, steps: int = 300,
                          warmup: int = 200, ramp: bool = True, smoothing: float = 0.1, seed: int = 0,
                          held_out: Pairs | None = None, eval_every: int = 50,
                          device: torch.device | str = "cpu") -> tuple[EncoderDecoder, dict]:
    """Chapter 7's recipe for written dates -> ISO dates: :func:`date_translator_config`, Adam (betas 0.9, 0.98) with
    :func:`faded_noam_rate`, label smoothing ``smoothing``, batches of 64 drawn from ``train_pairs``, the gradient's
    global norm clipped at 1.0. ``seed`` fixes the initial weights (:func:`tfm.seed_everything`) and the batch order
    (:func:`tfm.generator`). With ``held_out`` pairs, the same loss on them is recorded every ``eval_every`` steps.
    Returns ``(model, history)`` with the model in eval mode."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    seed_everything(seed)  # the initial weights
    model = EncoderDecoder(date_translator_config(src_vocab, tgt_vocab)).to(device)
    # foreach: one call updates every parameter; on a CPU the same numbers as the default loop, in less time
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, foreach=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: faded_noam_rate(step, steps, warmup,
                                                                                          ramp=ramp))
    loss_fn = LabelSmoothingLoss(smoothing=smoothing, ignore_index=tgt_vocab.pad_id)
    batches = random_batches(train_pairs, 64, src_vocab, tgt_vocab, seed=generator(seed).initial_seed())

    def loss_step(model: EncoderDecoder, batch) -> torch.Tensor:
        return loss_fn(model(batch.src, batch.tgt_in), batch.tgt_out)  # logits (B, T, n_vocab), targets (B, T)

    evaluate = None
    if held_out is not None:
        held_out_batch = make_batch(held_out, src_vocab, tgt_vocab).to(device)

        def evaluate(model: EncoderDecoder) -> float:
            return loss_step(model, held_out_batch).item()

    history = train(model, lambda: next(batches).to(device), loss_step, optimizer, steps, scheduler=scheduler,
                    clip_norm=1.0, evaluate=evaluate, eval_every=eval_every)
    return model.eval(), history


def translate(model: EncoderDecoder, src_vocab: Vocab, tgt_vocab: Vocab, source: list[str]) -> str:
    """Greedy translation of one tokenised source sentence into a string."""
    device = next(model.parameters()).device
    ids = torch.tensor([src_vocab.encode(source)], device=device)  # (1, S)
    out = greedy_decode(model, ids, max_len=model.config.max_len - 1, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id)
    return "".join(tgt_vocab.decode(out[0].tolist()))
