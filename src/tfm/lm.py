"""A language model of real text: the book's corpus as token streams, batches of windows, and a training recipe,
shared by chapters 14 to 16.

The split is chapter 12's: every fourth topic of the corpus is held out whole (19 of 79), and a held-out paragraph that
also appears in a training topic is dropped (pydoc repeats some paragraphs). The tokenizer is chapter 12's byte-pair
encoding learned on the training paragraphs only, cut to its first ``n_merges`` merges. Paragraphs are joined into one
stream per split, each followed by ``[SEP]``; a model trains on random windows of the training stream and is measured
on consecutive windows of the held-out stream. A count model (:mod:`tfm.ngram`) is scored on the same next ids, from the
same window's ids only (:func:`count_model_losses`), so the two are compared token for token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import bpe as bpe_module
from . import corpus
from .ngram import KneserNey
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


def repeated_span_windows(stream: Tensor, length: int, batch: int, share: float,
                          generator: torch.Generator | None = None,
                          device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """Like :func:`random_windows`, but in a share ``share`` of the windows (chosen at random) a span of the window
    is written again further on: a span of ``s`` ids starting at ``a`` overwrites the ids from ``b`` on, with ``s``
    drawn from 4 to half the window, ``a`` and ``b >= a + s`` at random. The distance from a token to its earlier copy
    varies, so copying from a fixed distance does not pay; copying what followed the current token's earlier
    occurrence does (an induction head)."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must lie in [0, 1], got {share}")
    if length < 7:
        raise ValueError(f"windows of at least 7 ids are needed to repeat a span, got length={length}")
    x, y = random_windows(stream, length, batch, generator)  # (B, T) each
    windows = torch.cat([x, y[:, -1:]], dim=1)  # (B, T + 1)
    chosen = torch.rand(batch, generator=generator) < share  # (B,)
    n = length + 1
    for row in chosen.nonzero().flatten().tolist():
        s = int(torch.randint(4, n // 2 + 1, (), generator=generator))  # the span's length
        a = int(torch.randint(0, n - 2 * s + 1, (), generator=generator))  # where it first occurs
        b = int(torch.randint(a + s, n - s + 1, (), generator=generator))  # where it occurs again
        windows[row, b : b + s] = windows[row, a : a + s]
    return windows[:, :-1].to(device), windows[:, 1:].to(device)


def consecutive_windows(stream: Tensor, length: int, stride: int | None = None) -> tuple[Tensor, Tensor]:
    """Windows of ``length`` ids starting every ``stride`` ids (default ``length``: consecutive, the remainder
    dropped): inputs and next ids, ``(n, T)`` each. A stride below ``length`` gives overlapping windows, so that
    every position of a window is measured on more tokens."""
    stride = length if stride is None else stride
    if not 1 <= stride <= length:
        raise ValueError(f"stride must lie in [1, length={length}], got {stride}")
    n = (len(stream) - 1 - length) // stride + 1
    if len(stream) < length + 1:
        raise ValueError(f"the stream ({len(stream)} ids) is shorter than one window of {length} + 1")
    starts = torch.arange(n) * stride  # (n,)
    windows = stream[starts[:, None] + torch.arange(length + 1)]  # (n, T + 1)
    return windows[:, :-1], windows[:, 1:]  # (n, T) each


@torch.no_grad()
def held_out_loss(model: nn.Module, stream: Tensor, length: int, batch: int = 64,
                  stride: int | None = None) -> tuple[float, Tensor]:
    """Mean cross-entropy (nats per token) of ``model`` on consecutive windows of ``stream`` (or windows every
    ``stride`` ids), and its mean at each position of the window ``(T,)``: position t predicts with t + 1 tokens of
    context."""
    x, y = consecutive_windows(stream, length, stride)  # (n, T)
    per_token = token_losses(model, x, y, batch)  # (n, T)
    return per_token.mean().item(), per_token.mean(0)


def token_losses(model: nn.Module, inputs: Tensor, targets: Tensor, batch: int = 64) -> Tensor:
    """Cross-entropy (nats) of every target under ``model`` in evaluation mode, ``batch`` rows at a time: inputs and
    targets ``(n, T)`` -> ``(n, T)``, on the CPU (the model's training mode is restored)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    losses = []
    for i in range(0, len(inputs), batch):
        logits = model(inputs[i : i + batch].to(device))  # (b, T, n_vocab)
        losses.append(F.cross_entropy(logits.transpose(1, 2).float(), targets[i : i + batch].to(device),
                                      reduction="none").cpu())  # (b, T)
    model.train(was_training)
    return torch.cat(losses)  # (n, T)


def count_model_losses(model: KneserNey, stream: Tensor, length: int, stride: int | None = None) -> Tensor:
    """-log P (nats) of every next id of :func:`consecutive_windows` ``(stream, length, stride)`` under a count model,
    from the ids of the same window only, as a Transformer with that window sees them: ``(n, T)``, float64."""
    x, _ = consecutive_windows(stream, length, stride)  # (n, T): only the shape and the starts are needed
    stride = length if stride is None else stride
    k = model.order - 1  # the count model's context
    ids = stream[: (len(x) - 1) * stride + length + 1].tolist()
    # With at least k ids of the window before it, a token's loss is the same in every window: compute it once.
    full = [math.nan] * len(ids)
    for i in range(k, len(ids)):
        full[i] = -math.log(model.prob(ids[i - k : i], ids[i]))
    losses = torch.empty(x.shape, dtype=torch.float64)  # (n, T)
    for row in range(len(x)):
        start = row * stride
        for t in range(length):  # position t predicts ids[start + t + 1] from ids[start .. start + t]
            i = start + t + 1
            losses[row, t] = full[i] if t + 1 >= k else -math.log(model.prob(ids[start:i], ids[i]))
    return losses


def train_lm(model: nn.Module, data: CorpusLM, steps: int, length: int = 128, batch: int = 16, lr: float = 3e-3,
             weight_decay: float = 0.1, warmup: float = 0.1, generator: torch.Generator | None = None,
             eval_every: int = 100, time_limit: float | None = None,
             repeat_share: float = 0.0, decay_vectors: bool = True) -> dict[str, list[float]]:
    """Train ``model`` on random windows of ``data.train`` with AdamW and a one-cycle schedule (linear warm-up over
    the first ``warmup`` share of the steps, then cosine decay), measuring the held-out loss every ``eval_every``
    steps. With ``repeat_share > 0`` that share of the windows repeats a span (:func:`repeated_span_windows`).
    Returns :func:`tfm.train`'s history (``loss``, ``eval_step``, ``eval_loss``, ...)."""
    return train_on_stream(model, data.train, data.held_out, steps, length=length, batch=batch, lr=lr,
                           weight_decay=weight_decay, warmup=warmup, generator=generator, eval_every=eval_every,
                           time_limit=time_limit, repeat_share=repeat_share, decay_vectors=decay_vectors)


def train_on_stream(model: nn.Module, train_ids: Tensor, held_out: Tensor, steps: int, length: int = 128,
                    batch: int = 16, lr: float = 3e-3, weight_decay: float = 0.1, warmup: float = 0.1,
                    generator: torch.Generator | None = None, eval_every: int = 100, time_limit: float | None = None,
                    repeat_share: float = 0.0, betas: tuple[float, float] = (0.9, 0.999), final_lr: float | None = None,
                    keep_best: bool = False, autocast: torch.dtype | None = None,
                    decay_vectors: bool = True) -> dict[str, list[float]]:
    """:func:`train_lm` on any stream of ids: random windows of ``train_ids (N,)``, the held-out loss measured on
    consecutive windows of ``held_out (M,)``. ``final_lr`` (default: the schedule's own, ``lr / 10**4``) is the rate
    the cosine decay ends at. With ``keep_best``, the model ends with the weights of its lowest held-out loss (early
    stopping: a run on a small training text that begins to memorise it keeps its best point), and
    ``history["best_step"]`` says which measurement that was. ``autocast`` is :func:`tfm.train`'s. With
    ``decay_vectors=False`` only the matrices decay, not norm gains and biases (as GPT-2-style recipes do)."""
    if steps < 1 or length < 1 or batch < 1:
        raise ValueError(f"steps, length and batch must be >= 1, got {steps}, {length}, {batch}")
    if len(train_ids) <= length + 1 or len(held_out) <= length + 1:
        raise ValueError(f"the streams ({len(train_ids):,} and {len(held_out):,} ids) must be longer than one window "
                         f"of {length} + 1")
    device = next(model.parameters()).device
    kept = [p for p in model.parameters() if p.dim() <= 1 and not decay_vectors]  # norm gains, biases: no decay
    decayed = [p for p in model.parameters() if p.dim() > 1 or decay_vectors]
    groups = [{"params": decayed}, {"params": kept, "weight_decay": 0.0}]  # an empty group is allowed
    optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay, betas=betas)
    schedule = {} if final_lr is None else {"final_div_factor": (lr / 25) / final_lr}  # OneCycleLR starts at lr / 25
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=steps, pct_start=warmup,
                                                    cycle_momentum=False, **schedule)

    def loss_step(m: nn.Module, batch_: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch_
        return F.cross_entropy(m(x).transpose(1, 2), y)

    def next_batch() -> tuple[Tensor, Tensor]:
        if repeat_share:
            return repeated_span_windows(train_ids, length, batch, repeat_share, generator, device)
        return random_windows(train_ids, length, batch, generator, device)

    best: dict = {"loss": math.inf, "step": 0, "state": None}
    measured = [0]  # steps taken at each measurement, counted here so that the best one can be named

    def evaluate(m: nn.Module) -> float:
        loss = held_out_loss(m, held_out, length)[0]
        if keep_best and loss < best["loss"]:
            best.update(loss=loss, step=len(measured) - 1,
                        state={k: v.detach().clone() for k, v in m.state_dict().items()})
        measured.append(0)
        return loss

    history = train(model, next_batch, loss_step, optimizer, steps, scheduler=scheduler, evaluate=evaluate,
                    eval_every=eval_every, time_limit=time_limit, autocast=autocast)
    if keep_best:
        model.load_state_dict(best["state"])
        history["best_step"] = history["eval_step"][best["step"]]
    return history


def fit_power_law(sizes: list[float], losses: list[float]) -> tuple[float, float]:
    """The power law ``L = a * N**(-alpha)`` closest to the points ``(N, L)`` in log-log space (least squares of
    ``log L = log a - alpha log N``): returns ``(alpha, a)``."""
    if len(sizes) != len(losses) or len(sizes) < 2 or min(*sizes, *losses) <= 0:
        raise ValueError(f"need at least two points with positive sizes and losses, got {len(sizes)} sizes and "
                         f"{len(losses)} losses")
    x = torch.tensor(sizes, dtype=torch.float64).log()  # (n,)
    y = torch.tensor(losses, dtype=torch.float64).log()  # (n,)
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    return -slope.item(), math.exp((y.mean() - slope * x.mean()).item())


def fit_power_law_with_floor(sizes: list[float], losses: list[float]) -> tuple[float, float, float]:
    """The law ``L = E + A * N**(-alpha)`` closest to the points ``(N, L)`` in squared error of L (nats): returns
    ``(E, A, alpha)`` with ``E >= 0``, ``A >= 0``, ``alpha > 0``. E is the loss no size removes (the text's own
    entropy, for a model trained to convergence), A and alpha how fast size approaches it (Hoffmann et al., 2022).

    For a fixed alpha the best E and A are a linear least-squares problem, so alpha alone is searched: on a grid of
    400 values from 0.01 to 4 (log-spaced), then refined by golden-section search around the best. With three points
    the law passes through them: only a fourth point or more tests it (its residuals)."""
    if len(sizes) != len(losses) or len(sizes) < 3 or min(*sizes, *losses) <= 0:
        raise ValueError(f"need at least three points with positive sizes and losses, got {len(sizes)} sizes and "
                         f"{len(losses)} losses")
    n = torch.tensor(sizes, dtype=torch.float64)  # (k,)
    y = torch.tensor(losses, dtype=torch.float64)  # (k,)
    scale = n.log().mean().exp()  # sizes measured in their geometric mean, so that n**-alpha stays near 1

    def best_for(alpha: float) -> tuple[float, float, float]:  # (squared error, E, A / scale**alpha)
        x = (n / scale) ** -alpha  # (k,)
        xc, yc = x - x.mean(), y - y.mean()
        a = max(((xc * yc).sum() / (xc * xc).sum()).item(), 0.0) if (xc * xc).sum() > 0 else 0.0
        e = (y.mean() - a * x.mean()).item()
        if e < 0:  # the floor at 0: the best law through the origin
            e, a = 0.0, max(((x * y).sum() / (x * x).sum()).item(), 0.0)
        return ((y - e - a * x) ** 2).sum().item(), e, a

    grid = torch.logspace(-2, math.log10(4.0), 400, dtype=torch.float64).tolist()
    errors = [best_for(alpha)[0] for alpha in grid]
    i = min(range(len(grid)), key=errors.__getitem__)
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(60):  # golden-section search of the bracket around the grid's best
        c, d = hi - golden * (hi - lo), lo + golden * (hi - lo)
        lo, hi = (lo, d) if best_for(c)[0] <= best_for(d)[0] else (c, hi)
    alpha = (lo + hi) / 2
    _, e, a = best_for(alpha)
    return e, a * scale.item() ** alpha, alpha
