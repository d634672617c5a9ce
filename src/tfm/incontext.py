"""In-context learning, measured: how a language model's loss falls with the token's position in its context, and the
heads known to produce much of that fall, induction heads (Elhage et al., 2021; Olsson et al., 2022).

An induction head completes a pattern seen earlier in the context: at a token A that occurred before, followed by B,
it attends to that B and predicts B again ("... A B ... A -> B"). On a sequence of random tokens repeated twice, the
second copy is predictable only this way, so three measurements tell whether a model has such heads:

- the loss on the second copy against the first (:func:`loss_by_position`);
- each head's *prefix-matching score*: its attention from a token of the second copy to the token right after that
  token's previous occurrence (:func:`prefix_matching_scores`);
- ablation: zero a head's output and see the second copy's loss rise (:func:`ablate_heads`).
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
                           low: int = 0) -> Tensor:
    """``(batch, 2 * length)`` ids: ``length`` tokens drawn uniformly from ``low .. n_vocab - 1``, then the same
    again."""
    if length < 2 or batch < 1 or not 0 <= low < n_vocab:
        raise ValueError(f"need length >= 2, batch >= 1 and 0 <= low < n_vocab, got length={length}, batch={batch}, "
                         f"low={low}, n_vocab={n_vocab}")
    first = torch.randint(low, n_vocab, (batch, length), generator=generator)  # (B, L)
    return torch.cat([first, first], dim=1)  # (B, 2L)


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
