"""From a language model to an assistant: a chat template over token ids, the supervised fine-tuning (SFT) loss on
the assistant's tokens only, and packing short conversations into full rows without letting them see each other.

A conversation is a list of turns ``(role, text ids)``. The template writes each turn as ``<role> text <end>``, and
the response mask is True exactly on the tokens the assistant produces: its text and its end-of-turn token (so that
the model learns to stop), not its role token (the template writes that; the model only reads it).

Packing puts several examples into one row of ``context`` tokens. Two things keep a packed row equal to its examples
run one by one: a block-diagonal causal mask (a token sees only earlier tokens of its own document) and positions that
restart at 0 for each document. Masks are boolean, True = may attend, as everywhere in ``tfm``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import causal_mask

ROLES = ("system", "user", "assistant")


class Chat(NamedTuple):
    """A formatted conversation: ``ids (T,)`` and ``response_mask (T,)``, True on the tokens the SFT loss scores."""

    ids: Tensor
    response_mask: Tensor


def format_chat(turns: Sequence[tuple[str, Sequence[int]]], roles: Mapping[str, int], end_of_turn: int,
                bos: int | None = None, generation_prompt: bool = False) -> Chat:
    """``[<bos>] <role> text <end> <role> text <end> ...`` from ``turns`` = ``[(role, text ids), ...]``.

    ``roles`` gives the token id of each role in :data:`ROLES`. The response mask is True on each assistant turn's
    text and end-of-turn token. With ``generation_prompt=True`` the ids end with the assistant's role token, the prompt
    a model answers at inference (the mask is then all False and no assistant turn is needed)."""
    missing = [role for role in ROLES if role not in roles]
    if missing:
        raise ValueError(f"roles must give a token id for each of {ROLES}; missing {missing}")
    template_ids = {roles[role] for role in ROLES} | {end_of_turn} | ({bos} if bos is not None else set())
    ids, mask = ([bos], [False]) if bos is not None else ([], [])
    for i, (role, text) in enumerate(turns):
        if role not in ROLES:
            raise ValueError(f"turn {i} has the unknown role {role!r}; the allowed roles are {ROLES}")
        text = [int(t) for t in text]
        if not text:
            raise ValueError(f"turn {i} ({role}) is empty: every turn needs at least one token of text")
        clash = sorted(template_ids.intersection(text))
        if clash:
            raise ValueError(f"turn {i} ({role}) holds the template's own ids {clash} in its text: an end-of-turn or "
                             "role id inside a text would end the turn or fake a speaker (template injection)")
        ids += [roles[role], *text, end_of_turn]
        mask += [False] + [role == "assistant"] * (len(text) + 1)  # the role token is read, the rest is produced
    if generation_prompt:
        ids, mask = ids + [roles["assistant"]], [False] * (len(mask) + 1)
    elif not any(role == "assistant" for role, _ in turns):
        raise ValueError(f"the conversation has no assistant turn (roles {[role for role, _ in turns]}): the SFT loss "
                         "scores the assistant's tokens only, so there is nothing to learn from; for a prompt to "
                         "answer, pass generation_prompt=True")
    return Chat(torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.bool))  # (T,), (T,)


def sft_loss(logits: Tensor, targets: Tensor, response_mask: Tensor, completion_only: bool = True,
             token_mask: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """Cross-entropy of next-token predictions: on the response tokens only (``completion_only=True``), or on every
    token (``completion_only=False``), in both cases only where ``token_mask`` is True (default: everywhere).

    ``logits (B, T, n_vocab)`` are the model's outputs on ``targets (B, T)``, the same ids it read. **The shift by one
    happens here and only here**: the logits at position t predict token t + 1, so they are scored when token t + 1 is
    (a response token, or any token). Token 0 is never scored: nothing before it predicts it. ``reduction="mean"``
    averages over the scored tokens of the whole batch (not per sequence: a long answer weighs more than a short
    one), as TRL's ``SFTTrainer`` does; ``"sum"`` adds them up (packed and unpacked batches then agree exactly)."""
    if logits.dim() != 3 or targets.shape != logits.shape[:2] or targets.shape[1] < 2:
        raise ValueError(f"logits must be (B, T, n_vocab) and targets (B, T) with T >= 2, got logits "
                         f"{tuple(logits.shape)} and targets {tuple(targets.shape)}")
    for name, mask in (("response_mask", response_mask), ("token_mask", token_mask)):
        if mask is not None and (mask.dtype != torch.bool or mask.shape != targets.shape):
            raise ValueError(f"{name} must be a boolean (B, T) = {tuple(targets.shape)} tensor, True = scored; got "
                             f"{mask.dtype} {tuple(mask.shape)}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f'reduction must be "mean" or "sum", got {reduction!r}')
    scored = response_mask if completion_only else torch.ones_like(response_mask)  # (B, T): tokens to learn
    if token_mask is not None:
        scored = scored & token_mask  # (B, T)
    # The shift, the only one in tfm.chat: the logits at position t are scored against token t + 1, when it is scored
    scored = scored[:, 1:]  # (B, T - 1)
    predictions, next_tokens = logits[:, :-1][scored], targets[:, 1:][scored]  # (N, n_vocab), (N,)
    if not scored.any():
        raise ValueError("no token to score: the masks select no token after the first of its row "
                         f"(completion_only={completion_only}); a response needs at least one token")
    total = F.cross_entropy(predictions.float(), next_tokens, reduction="sum")  # ()
    return total if reduction == "sum" else total / scored.sum()


@dataclass
class Packed:
    """Examples packed into rows of ``context`` tokens, every tensor ``(B, context)``.

    ``document_ids`` holds each token's example index (-1 on the padding at row ends); ``positions`` restart at 0 for
    each example (0 on padding). ``response_mask`` is the examples' own, False on padding and on each document's first
    token (the token before it belongs to another document, so predicting it would teach nonsense)."""

    tokens: Tensor
    response_mask: Tensor
    document_ids: Tensor
    positions: Tensor

    def to(self, device: torch.device | str) -> Packed:
        return Packed(*(t.to(device) for t in (self.tokens, self.response_mask, self.document_ids, self.positions)))

    @property
    def token_mask(self) -> Tensor:
        """``(B, T)``: the targets of ``completion_only=False``: real tokens, not a document's first."""
        return (self.document_ids >= 0) & (self.positions > 0)


def pack(examples: Sequence[tuple[Sequence[int], Sequence[bool]]], context: int, pad_id: int = 0) -> Packed:
    """Pack ``examples`` = ``[(ids, response_mask), ...]`` (e.g. :class:`Chat` s) into rows of ``context`` tokens,
    greedily: each example, in order, goes into the first row with room for it (first fit), else into a new row.

    No example is ever cut: one longer than ``context`` is an error. (TRL packs "best fit decreasing": the longest
    example first, each into the row it fills best, which wastes less padding.)"""
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ValueError(f"context must be a positive int (tokens per row), got {context!r}")
    if len(examples) == 0:
        raise ValueError("cannot pack an empty list of examples")
    rows: list[list[int]] = []  # example indices, row by row
    room: list[int] = []  # free tokens left in each row
    for i, (ids, mask) in enumerate(examples):
        if len(ids) == 0 or len(mask) != len(ids):
            raise ValueError(f"example {i} has {len(ids)} ids and {len(mask)} mask entries: it needs at least one "
                             "token, and one mask entry per token")
        if len(ids) > context:
            raise ValueError(f"example {i} has {len(ids)} tokens, more than the context of {context}: packing never "
                             "cuts an example; truncate or drop it, or pack with a longer context")
        row = next((r for r, free in enumerate(room) if free >= len(ids)), None)  # first fit
        if row is None:
            rows.append([])
            room.append(context)
            row = len(rows) - 1
        rows[row].append(i)
        room[row] -= len(ids)
    shape = (len(rows), context)  # (B, T)
    tokens = torch.full(shape, pad_id, dtype=torch.long)  # (B, T)
    response = torch.zeros(shape, dtype=torch.bool)  # (B, T)
    documents = torch.full(shape, -1, dtype=torch.long)  # (B, T)
    positions = torch.zeros(shape, dtype=torch.long)  # (B, T)
    for r, members in enumerate(rows):
        at = 0
        for i in members:
            ids, mask = examples[i]
            n = len(ids)
            tokens[r, at : at + n] = torch.as_tensor(ids, dtype=torch.long)
            response[r, at : at + n] = torch.as_tensor(mask, dtype=torch.bool)
            documents[r, at : at + n] = i
            positions[r, at : at + n] = torch.arange(n)  # each document starts at position 0
            at += n
    response &= positions > 0  # a document's first token is no one's target
    return Packed(tokens, response, documents, positions)


def packed_attention_mask(document_ids: Tensor) -> Tensor:
    """``(B, T, T)``, True = may attend: query i sees key j when j <= i and both lie in the same document
    (block-diagonal causal). Padding (document id -1) sees nothing and is seen by nothing; a row with no key gets
    zero attention weights in :func:`tfm.attention`, not NaN."""
    if document_ids.dim() != 2 or document_ids.dtype.is_floating_point or document_ids.dtype == torch.bool:
        raise ValueError(f"document_ids must be integer (B, T), got {document_ids.dtype} {tuple(document_ids.shape)}")
    T = document_ids.shape[1]
    same = document_ids[:, :, None] == document_ids[:, None, :]  # (B, T, T): query's document = key's document
    real = (document_ids >= 0)[:, :, None]  # (B, T, 1): the query is a token, not padding
    return same & real & causal_mask(T, device=document_ids.device)  # (B, T, T)
