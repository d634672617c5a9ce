"""Recipes shared by chapters: a complete, seeded training run that another chapter can reuse instead of repeating.

Chapter 7 builds the date translator step by step; chapter 8 calls :func:`train_date_translator` to get the same model
for its attention views.
"""

from __future__ import annotations

import torch

from .data import Vocab, date_pairs, random_batches
from .decoding import greedy_decode
from .model import EncoderDecoder, TransformerConfig
from .training import LabelSmoothingLoss, noam_scheduler, train


def train_date_translator(steps: int = 1400, n_pairs: int = 20_000, seed: int = 0,
                          device: torch.device | str = "cpu") -> tuple[EncoderDecoder, Vocab, Vocab, dict]:
    """Chapter 7's recipe: written dates -> ISO dates with a 2+2-layer, d_model-64 model, Adam with the warm-up
    schedule (warmup 200) and label smoothing 0.1, batches of 64. Returns ``(model, src_vocab, tgt_vocab, history)``
    with the model in eval mode."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    torch.manual_seed(seed)
    pairs = date_pairs(n_pairs, seed=seed)
    src_vocab = Vocab.from_sequences(src for src, _ in pairs)
    tgt_vocab = Vocab.from_sequences(tgt for _, tgt in pairs)
    config = TransformerConfig(src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), d_model=64, n_heads=4,
                               n_encoder_layers=2, n_decoder_layers=2, d_ff=128, dropout=0.0, max_len=32,
                               pad_id=src_vocab.pad_id, tie_output=True)
    model = EncoderDecoder(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = noam_scheduler(optimizer, d_model=64, warmup=200)
    loss_fn = LabelSmoothingLoss(smoothing=0.1, ignore_index=tgt_vocab.pad_id)
    batches = random_batches(pairs, 64, src_vocab, tgt_vocab, seed=seed)

    def loss_step(model: EncoderDecoder, batch) -> torch.Tensor:
        return loss_fn(model(batch.src, batch.tgt_in), batch.tgt_out)  # logits (B, T, n_vocab), targets (B, T)

    history = train(model, lambda: next(batches).to(device), loss_step, optimizer, steps, scheduler=scheduler)
    return model.eval(), src_vocab, tgt_vocab, history


def translate(model: EncoderDecoder, src_vocab: Vocab, tgt_vocab: Vocab, source: list[str]) -> str:
    """Greedy translation of one tokenised source sentence into a string."""
    device = next(model.parameters()).device
    ids = torch.tensor([src_vocab.encode(source)], device=device)  # (1, S)
    out = greedy_decode(model, ids, max_len=model.config.max_len - 1, bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id)
    return "".join(tgt_vocab.decode(out[0].tolist()))
