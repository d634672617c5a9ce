"""A language model of real text: the book's corpus as token streams, batches of windows, and a training recipe,
shared by chapters 14 to 16.

The split is chapter 12's: every fourth topic of the corpus is held out whole (19 of 79), and a held-out paragraph that
also appears in a training topic is dropped (pydoc repeats some paragraphs). The tokenizer is chapter 12's byte-pair
encoding learned on the training paragraphs only, cut to its first ``n_merges`` merges. Paragraphs are joined into one
stream per split, each followed by ``[SEP]``; a model trains on random windows of the training stream and is measured
on consecutive windows of the held-out stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import bpe as bpe_module
from . import corpus
from .training import train


@dataclass(frozen=True)
class CorpusLM:
    """The corpus, tokenized: ``train`` and ``held_out`` streams of ids ``(N,)``, and the same text as lists of
    paragraphs (each a list of ids, without ``[SEP]``) for count models."""

    tokenizer: bpe_module.BPETokenizer
    train: Tensor
    held_out: Tensor
    train_paragraphs: tuple[tuple[int, ...], ...]
    held_out_paragraphs: tuple[tuple[int, ...], ...]

    @property
    def n_vocab(self) -> int:
        return len(self.tokenizer)


def split_paragraphs() -> tuple[list[str], list[str]]:
    """Chapter 12's split: (training paragraphs, held-out paragraphs that no training topic repeats)."""
    topics = corpus.topics()
    held_out_topics = set(list(topics)[3::4])  # every fourth topic: 19 of 79
    train = [p for name, ps in topics.items() if name not in held_out_topics for p in ps]
    seen = set(train)
    held_out = [p for name, ps in topics.items() if name in held_out_topics for p in ps if p not in seen]
    return train, held_out


@cache
def corpus_lm(n_merges: int = 250) -> CorpusLM:
    """The corpus as token ids, with chapter 12's BPE cut to its first ``n_merges`` merges (cached per value)."""
    if n_merges < 0:
        raise ValueError(f"n_merges must be >= 0, got {n_merges}")
    train_text, held_out_text = split_paragraphs()
    tokenizer = bpe_module.train_bpe(bpe_module.word_counts(train_text), n_merges=n_merges)
    sep = tokenizer.id_of("[SEP]")
    train_ids = tuple(tuple(tokenizer.encode(p)) for p in train_text)
    held_ids = tuple(tuple(tokenizer.encode(p)) for p in held_out_text)

    def stream(paragraphs: tuple[tuple[int, ...], ...]) -> Tensor:
        return torch.tensor([t for p in paragraphs for t in (*p, sep)])  # (N,)

    return CorpusLM(tokenizer, stream(train_ids), stream(held_ids), train_ids, held_ids)


def random_windows(stream: Tensor, length: int, batch: int, generator: torch.Generator | None = None,
                   device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """``batch`` windows of ``length + 1`` consecutive ids at random places: inputs ``(B, T)`` and next ids
    ``(B, T)``."""
    if stream.dim() != 1 or len(stream) <= length + 1:
        raise ValueError(f"need a 1-D stream longer than length + 1 = {length + 1}, got shape {tuple(stream.shape)}")
    starts = torch.randint(0, len(stream) - length - 1, (batch,), generator=generator)  # (B,)
    offsets = torch.arange(length + 1)  # (T + 1,)
    windows = stream[starts[:, None] + offsets].to(device)  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def consecutive_windows(stream: Tensor, length: int) -> tuple[Tensor, Tensor]:
    """The stream cut into consecutive windows of ``length`` (the remainder dropped): inputs and next ids,
    ``(n, T)`` each."""
    n = (len(stream) - 1) // length
    if n < 1:
        raise ValueError(f"the stream ({len(stream)} ids) is shorter than one window of {length} + 1")
    used = stream[: n * length + 1]
    return used[:-1].view(n, length), used[1:].view(n, length)  # (n, T) each


@torch.no_grad()
def held_out_loss(model: nn.Module, stream: Tensor, length: int, batch: int = 64) -> tuple[float, Tensor]:
    """Mean cross-entropy (nats per token) of ``model`` on consecutive windows of ``stream``, and its mean at each
    position of the window ``(T,)``: position t predicts with t + 1 tokens of context."""
    device = next(model.parameters()).device
    x, y = consecutive_windows(stream, length)  # (n, T)
    was_training = model.training
    model.eval()
    losses = []
    for i in range(0, len(x), batch):
        logits = model(x[i : i + batch].to(device))  # (b, T, n_vocab)
        losses.append(F.cross_entropy(logits.transpose(1, 2).float(), y[i : i + batch].to(device),
                                      reduction="none").cpu())  # (b, T)
    model.train(was_training)
    per_token = torch.cat(losses)  # (n, T)
    return per_token.mean().item(), per_token.mean(0)


def train_lm(model: nn.Module, data: CorpusLM, steps: int, length: int = 128, batch: int = 16, lr: float = 3e-3,
             weight_decay: float = 0.1, warmup: float = 0.1, generator: torch.Generator | None = None,
             eval_every: int = 100, time_limit: float | None = None) -> dict[str, list[float]]:
    """Train ``model`` on random windows of ``data.train`` with AdamW and a one-cycle schedule (linear warm-up over
    the first ``warmup`` share of the steps, then cosine decay), measuring the held-out loss every ``eval_every``
    steps. Returns :func:`tfm.train`'s history (``loss``, ``eval_step``, ``eval_loss``, ...)."""
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=steps, pct_start=warmup,
                                                    cycle_momentum=False)

    def loss_step(m: nn.Module, batch_: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch_
        return F.cross_entropy(m(x).transpose(1, 2), y)

    return train(model, lambda: random_windows(data.train, length, batch, generator, device), loss_step, optimizer,
                 steps, scheduler=scheduler, evaluate=lambda m: held_out_loss(m, data.held_out, length)[0],
                 eval_every=eval_every, time_limit=time_limit)
