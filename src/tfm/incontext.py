"""In-context learning, measured: how a language model's loss falls with the token's position in its context, and the
heads known to produce much of that fall, induction heads (Elhage et al., 2021; Olsson et al., 2022).

An induction head completes a pattern seen earlier in the context: at a token A that occurred before, followed by B,
it attends to that B and predicts B again ("... A B ... A -> B"). On a sequence of random tokens repeated twice, the
second copy is predictable only this way, so three measurements tell whether a model has such heads:

- the loss on the second copy against the first (:func:`loss_by_position`);
- each head's *prefix-matching score*: its attention from a token of the second copy to the token right after that
  token's previous occurrence (:func:`prefix_matching_scores`);
- ablation: zero a head's output and see the second copy's loss rise (:func:`ablate_heads`).

The other half of the circuit is a *previous-token head* in an earlier layer (:func:`previous_token_scores`).
:func:`train_to_copy` trains a model on sequences where copying is the only way to predict (chapter 14's smallest
setting in which induction heads form).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def attention_layers(model: nn.Module) -> list[nn.Module]:
    """The self-attention module of every layer, first to last (:class:`tfm.CausalLM`, :class:`tfm.modern.ModernLM`)."""
    layers = model.layers if hasattr(model, "layers") else getattr(getattr(model, "decoder", None), "layers", None)
    if layers is None:
        raise TypeError(f"{type(model).__name__} is not a tfm decoder-only model (no .layers or .decoder.layers)")
    return [layer.self_attn for layer in layers]


@torch.no_grad()
def loss_by_position(model: nn.Module, ids: Tensor) -> Tensor:
    """Mean cross-entropy (nats) of predicting token t + 1 from tokens 0..t, for each t: ``ids (B, T)`` -> ``(T - 1,)``.

    Entry t is the loss of a prediction made with t + 1 tokens of context."""
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must have shape (B, T) with T >= 2, got {tuple(ids.shape)}")
    logits = model(ids[:, :-1])  # (B, T - 1, n_vocab)
    losses = F.cross_entropy(logits.transpose(1, 2).float(), ids[:, 1:], reduction="none")  # (B, T - 1)
    return losses.mean(0)  # (T - 1,)


def in_context_score(losses: Tensor, early: int | tuple[int, int], late: int | tuple[int, int]) -> float:
    """Olsson et al.'s in-context-learning score: the loss at a late position minus the loss at an early one (negative
    when the model does better with more context). ``losses`` as :func:`loss_by_position` gives them. A position may
    also be a range ``(start, stop)`` of positions, whose mean loss is taken (less noisy on few sequences)."""
    def span(p: int | tuple[int, int]) -> tuple[int, int]:
        return (p, p + 1) if isinstance(p, int) else tuple(p)

    (a, b), (c, d) = span(early), span(late)
    if not (0 <= a < b <= c < d <= len(losses)):
        raise ValueError(f"need 0 <= early < late < {len(losses)} (ranges: start < stop, early before late), got "
                         f"early={early}, late={late}")
    return float(losses[c:d].mean() - losses[a:b].mean())


def repeated_random_tokens(n_vocab: int, length: int, batch: int, generator: torch.Generator | None = None,
                           low: int = 0, distinct: bool = False) -> Tensor:
    """``(batch, 2 * length)`` ids: ``length`` tokens drawn uniformly from ``low .. n_vocab - 1``, then the same
    again. With ``distinct`` no token occurs twice within a copy, so each has one earlier occurrence to match."""
    if length < 2 or batch < 1 or not 0 <= low < n_vocab or (distinct and length > n_vocab - low):
        raise ValueError(f"need length >= 2, batch >= 1, 0 <= low < n_vocab and, if distinct, length <= n_vocab - "
                         f"low; got length={length}, batch={batch}, low={low}, n_vocab={n_vocab}")
    if distinct:  # the first `length` of a random permutation of the allowed ids, per row
        first = torch.rand(batch, n_vocab - low, generator=generator).argsort(dim=1)[:, :length] + low  # (B, L)
    else:
        first = torch.randint(low, n_vocab, (batch, length), generator=generator)  # (B, L)
    return torch.cat([first, first], dim=1)  # (B, 2L)


def repeating_random_tokens(n_vocab: int, length: int, batch: int, periods: tuple[int, int] = (8, 32),
                            generator: torch.Generator | None = None) -> Tensor:
    """``(batch, length)`` ids for learning to copy: each row is a span of random tokens repeated until the row is
    full, its length (the period) drawn uniformly from ``periods`` (both ends included) for each row. After the first
    period every token is predictable by copying, and by nothing else; the distance back to the copy varies from row
    to row, so no fixed look-back distance does it."""
    low, high = periods
    if not 1 <= low <= high < length or batch < 1:
        raise ValueError(f"need 1 <= periods[0] <= periods[1] < length and batch >= 1, got periods={periods}, "
                         f"length={length}, batch={batch}")
    period = torch.randint(low, high + 1, (batch, 1), generator=generator)  # (B, 1)
    spans = torch.randint(0, n_vocab, (batch, high), generator=generator)  # (B, high): the first `period` are used
    positions = torch.arange(length) % period  # (B, T): where each place copies from
    return spans.gather(1, positions)  # (B, T)


def prefix_matching_scores(weights: list[Tensor], length: int) -> Tensor:
    """Per layer and head, the mean attention from position t of the second copy (t = L .. 2L - 1) to position
    t - L + 1, the token that followed t's token in the first copy: ``weights`` is one ``(B, h, 2L, 2L)`` tensor per
    layer (a model's ``need_weights=True`` output on :func:`repeated_random_tokens`) -> ``(n_layers, h)``."""
    scores = []
    for w in weights:
        if w is None or w.dim() != 4 or w.shape[-1] < 2 * length or w.shape[-2] < 2 * length:
            raise ValueError(f"expected attention weights (B, h, 2L, 2L) with L={length}, got "
                             f"{None if w is None else tuple(w.shape)}")
        t = torch.arange(length, 2 * length, device=w.device)  # (L,): the second copy's positions
        scores.append(w[:, :, t, t - length + 1].mean(dim=(0, 2)))  # (h,)
    return torch.stack(scores)  # (n_layers, h)


def previous_token_scores(weights: list[Tensor]) -> Tensor:
    """Per layer and head, the mean attention from each position t >= 1 to position t - 1 (a previous-token head
    scores near 1): ``weights`` one ``(B, h, T, T)`` tensor per layer -> ``(n_layers, h)``."""
    scores = []
    for w in weights:
        if w is None or w.dim() != 4 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 2:
            raise ValueError(f"expected square attention weights (B, h, T, T) with T >= 2, got "
                             f"{None if w is None else tuple(w.shape)}")
        t = torch.arange(1, w.shape[-1], device=w.device)  # (T - 1,)
        scores.append(w[:, :, t, t - 1].mean(dim=(0, 2)))  # (h,)
    return torch.stack(scores)  # (n_layers, h)


def train_to_copy(model: nn.Module, n_vocab: int, steps: int, length: int = 64, batch: int = 32, lr: float = 3e-3,
                  periods: tuple[int, int] = (8, 32), eval_every: int = 25,
                  generator: torch.Generator | None = None) -> dict[str, list[float]]:
    """Train a decoder-only model on :func:`repeating_random_tokens` (AdamW at a constant rate, no weight decay) and
    measure, every ``eval_every`` steps, the repeat test on 64 fixed sequences of ``length // 2`` distinct tokens
    repeated twice: the loss on each copy and the best prefix-matching score of any head. Returns lists under
    "step", "loss" (the training loss of each step), "eval_step", "first", "second" and "prefix"."""
    if steps < 1 or eval_every < 1 or length % 2:
        raise ValueError(f"need steps >= 1, eval_every >= 1 and an even length, got {steps}, {eval_every}, {length}")
    device = next(model.parameters()).device
    half = length // 2
    probe = repeated_random_tokens(n_vocab, half, 64, torch.Generator().manual_seed(123), distinct=True)  # (64, 2L)
    probe = probe.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history: dict[str, list[float]] = {k: [] for k in ("step", "loss", "eval_step", "first", "second", "prefix")}
    for step in range(1, steps + 1):
        model.train()
        ids = repeating_random_tokens(n_vocab, length, batch, periods, generator).to(device)  # (B, T)
        logits = model(ids[:, :-1])  # (B, T - 1, n_vocab)
        loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history["step"].append(step)
        history["loss"].append(loss.item())
        if step % eval_every == 0 or step == steps:
            model.eval()
            with torch.no_grad():
                losses = loss_by_position(model, probe)  # (2L - 1,)
                _, weights = model(probe, need_weights=True)
            history["eval_step"].append(step)
            history["first"].append(losses[: half - 1].mean().item())
            history["second"].append(losses[half:].mean().item())
            history["prefix"].append(prefix_matching_scores(weights, half).max().item())
    model.eval()
    return history


@contextmanager
def ablate_heads(model: nn.Module, heads: list[tuple[int, int]]) -> Iterator[None]:
    """Within the block, the output of each (layer, head) in ``heads`` is zero: its slice of the concatenated heads is
    cleared before the output projection (W_O), so the head contributes nothing to the residual stream."""
    layers = attention_layers(model)
    handles = []
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        if not 0 <= layer < len(layers) or not 0 <= head < layers[layer].n_heads:
            raise ValueError(f"no head {head} in layer {layer}: the model has {len(layers)} layers of "
                             f"{layers[0].n_heads} heads")
        by_layer.setdefault(layer, []).append(head)
    for layer, chosen in by_layer.items():
        attn = layers[layer]
        projection = attn.out_proj if hasattr(attn, "out_proj") else attn.o_proj
        keep = torch.ones(attn.n_heads, attn.d_k)  # (h, d_k)
        keep[chosen] = 0.0
        keep = keep.flatten()  # (h * d_k,): the concatenation's layout, head after head

        def zero_heads(module, inputs, keep=keep):
            (concatenated,) = inputs  # (B, T, h * d_k)
            return (concatenated * keep.to(concatenated.device, concatenated.dtype),)

        handles.append(projection.register_forward_pre_hook(zero_heads))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
