"""Turning a trained model into outputs: greedy and beam search for the encoder–decoder, sampling for a causal LM.

Every search can run with a key/value cache (``use_cache=True``): each step then feeds only the newest token through
the decoder and reuses the keys and values of earlier positions, which gives the same tokens as recomputing the whole
prefix at every step.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .model import EncoderDecoder


def reorder_caches(caches: list, index: Tensor) -> None:
    """Select (and repeat) batch rows of every cached tensor in place, e.g. to follow the surviving beams."""
    for cache in caches:
        for key, value in cache.items():
            if isinstance(value, dict):
                reorder_caches([value], index)
            else:
                cache[key] = value.index_select(0, index)


def _check_src(model: EncoderDecoder, src: Tensor, max_len: int) -> None:
    if src.dim() != 2 or src.shape[0] == 0:
        raise ValueError(f"src must be a non-empty batch of token ids (B, S), got shape {tuple(src.shape)}")
    if not 1 <= max_len < model.config.max_len:
        raise ValueError(f"max_len must lie in [1, {model.config.max_len}) (the positional table), got {max_len}")


@torch.no_grad()
def greedy_decode(model: EncoderDecoder, src: Tensor, max_len: int, bos_id: int, eos_id: int,
                  use_cache: bool = True) -> Tensor:
    """Pick the most probable next token until every row has produced ``eos_id`` or ``max_len`` tokens.

    Returns ``(B, 1 + L)`` ids starting with ``bos_id``; positions after a row's end-of-sequence hold ``pad_id``.
    """
    _check_src(model, src, max_len)
    memory, _ = model.encode(src)  # (B, S, d_model)
    src_keys = model.src_key_mask(src)  # (B, S)
    B = src.shape[0]
    out = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    caches = model.new_caches() if use_cache else None
    for step in range(max_len):
        if use_cache:
            logits, _ = model.decode(out[:, -1:], memory, src_keys, caches=caches, start=step)  # (B, 1, n_vocab)
        else:
            logits, _ = model.decode(out, memory, src_keys)  # (B, step + 1, n_vocab)
        next_token = logits[:, -1].argmax(-1)  # (B,)
        next_token = next_token.masked_fill(done, model.config.pad_id)
        out = torch.cat([out, next_token[:, None]], dim=1)  # (B, step + 2)
        done |= next_token == eos_id
        if bool(done.all()):
            break
    return out


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + length) / 6) ** alpha (Wu et al., 2016); alpha = 0 means none."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model: EncoderDecoder, src: Tensor, max_len: int, bos_id: int, eos_id: int, beam_size: int = 4,
                alpha: float = 0.6, use_cache: bool = True) -> list[Tensor]:
    """Keep the ``beam_size`` best prefixes at every step; rank finished ones by log-probability / length penalty.

    The search stops when no live prefix can beat the best finished sequence any more (or at ``max_len``), not after
    a fixed number of finished sequences: a count would stop before a better, longer sequence ends.

    ``src (B, S)`` is searched one example at a time. Returns one 1-D tensor of ids (starting with ``bos_id``, ending
    with ``eos_id`` unless ``max_len`` was reached) per example.
    """
    _check_src(model, src, max_len)
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    return [_beam_search_one(model, src[b : b + 1], max_len, bos_id, eos_id, beam_size, alpha, use_cache)
            for b in range(src.shape[0])]


def _beam_search_one(model, src, max_len, bos_id, eos_id, beam_size, alpha, use_cache) -> Tensor:
    memory, _ = model.encode(src)  # (1, S, d_model)
    src_keys = model.src_key_mask(src)  # (1, S)
    beams = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (k, t)
    scores = torch.zeros(1, device=src.device)  # (k,) summed log-probabilities
    caches = model.new_caches() if use_cache else None
    finished: list[tuple[float, Tensor]] = []
    for step in range(max_len):
        k = beams.shape[0]
        mem, keys = memory.expand(k, -1, -1), src_keys.expand(k, -1)
        if use_cache:
            logits, _ = model.decode(beams[:, -1:], mem, keys, caches=caches, start=step)  # (k, 1, n_vocab)
        else:
            logits, _ = model.decode(beams, mem, keys)  # (k, t, n_vocab)
        log_probs = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (k, n_vocab)
        candidates = (scores[:, None] + log_probs).flatten()  # (k * n_vocab,)
        top_scores, top_index = candidates.topk(min(2 * beam_size, candidates.numel()))
        n_vocab = log_probs.shape[-1]
        keep_rows, keep_scores, keep_tokens = [], [], []
        for score, index in zip(top_scores.tolist(), top_index.tolist(), strict=True):
            row, token = divmod(index, n_vocab)
            if token == eos_id:
                sequence = torch.cat([beams[row], beams.new_tensor([eos_id])])
                finished.append((score / length_penalty(step + 1, alpha), sequence))
            else:
                keep_rows.append(row)
                keep_scores.append(score)
                keep_tokens.append(token)
            if len(keep_rows) == beam_size:
                break
        # Stop when no live prefix can still beat the best finished sequence. Extending a prefix only lowers its
        # (negative) log-probability, so its best possible normalised score is its score divided by the largest
        # length penalty it can still reach (at max_len for alpha >= 0, at the next length for alpha < 0).
        best_finished = max((s for s, _ in finished), default=-math.inf)
        largest_penalty = max(length_penalty(step + 2, alpha), length_penalty(max_len, alpha))
        best_alive = max(keep_scores, default=-math.inf) / largest_penalty
        if not keep_rows or best_finished >= best_alive:
            break
        rows = torch.tensor(keep_rows, device=src.device)
        beams = torch.cat([beams[rows], torch.tensor(keep_tokens, device=src.device)[:, None]], dim=1)  # (k', t + 1)
        scores = torch.tensor(keep_scores, device=src.device)
        if caches is not None:
            reorder_caches(caches, rows)
    if not finished:
        lengths = beams.shape[1] - 1
        finished = [(s / length_penalty(lengths, alpha), b) for s, b in zip(scores.tolist(), beams, strict=True)]
    return max(finished, key=lambda pair: pair[0])[1]


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus (top-p) filtering (Holtzman et al., 2020): ``logits (..., n_vocab)`` with every token outside the
    nucleus set to -inf. The nucleus is the smallest set of likeliest tokens whose probabilities sum to at least ``p``:
    a token is dropped when the tokens ranked above it already carry ``p``, so the likeliest token is always kept."""
    if not 0 < p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., n_vocab)
    sorted_probs = torch.softmax(sorted_logits, dim=-1)  # (..., n_vocab)
    outside = sorted_probs.cumsum(dim=-1) - sorted_probs >= p  # (..., n_vocab): the tokens above carry p already
    outside = outside.scatter(-1, order, outside)  # back in vocabulary order
    return logits.masked_fill(outside, float("-inf"))


@torch.no_grad()
def generate(model: nn.Module, prompt: Tensor, n_new: int, temperature: float = 1.0, top_k: int | None = None,
             use_cache: bool = True, generator: torch.Generator | None = None, top_p: float | None = None) -> Tensor:
    """Continue ``prompt (B, T)`` by ``n_new`` tokens. ``temperature=0`` means greedy; ``top_k`` keeps the k likeliest;
    ``top_p`` keeps the nucleus (:func:`top_p_filter`) of the distribution at that temperature, after ``top_k``.

    ``model`` is a decoder-only language model with ``n_vocab``, ``max_len``, ``new_caches()`` and
    ``model(ids, caches=..., start=...)`` (:class:`tfm.CausalLM`, :class:`tfm.modern.ModernLM`).

    Returns ``(B, T + n_new)``.
    """
    if prompt.dim() != 2 or prompt.shape[1] == 0:
        raise ValueError(f"prompt must be token ids of shape (B, T) with T >= 1, got {tuple(prompt.shape)}")
    if prompt.shape[1] + n_new > model.max_len:
        raise ValueError(f"prompt length {prompt.shape[1]} + n_new {n_new} exceeds the model's max_len {model.max_len}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and not 1 <= top_k <= model.n_vocab:
        raise ValueError(f"top_k must lie in [1, {model.n_vocab}], got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
    caches = model.new_caches() if use_cache else None
    out = prompt
    logits = model(prompt, caches=caches)  # (B, T, n_vocab)
    for step in range(n_new):
        next_logits = logits[:, -1].float()  # (B, n_vocab)
        if temperature == 0:
            token = next_logits.argmax(-1, keepdim=True)  # (B, 1)
        else:
            next_logits = next_logits / temperature
            if top_k is not None:
                kth = next_logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
                next_logits = next_logits.masked_fill(next_logits < kth, float("-inf"))
            if top_p is not None:
                next_logits = top_p_filter(next_logits, top_p)  # (B, n_vocab)
            token = torch.multinomial(torch.softmax(next_logits, -1), 1, generator=generator)  # (B, 1)
        out = torch.cat([out, token], dim=1)  # (B, T + step + 1)
        if step == n_new - 1:
            break
        if use_cache:
            logits = model(token, caches=caches, start=out.shape[1] - 1)  # (B, 1, n_vocab)
        else:
            logits = model(out)  # (B, T + step + 1, n_vocab)
    return out
