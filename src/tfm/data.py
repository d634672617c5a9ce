"""Synthetic sequence tasks generated in code (nothing is downloaded), a vocabulary, and padded batches."""

from __future__ import annotations

import datetime
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)

Pair = tuple[list[str], list[str]]


class Vocab:
    """Token <-> id. Ids 0-3 are the specials ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``."""

    def __init__(self, tokens: Iterable[str]):
        self.itos = list(SPECIALS) + sorted(set(tokens) - set(SPECIALS))
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (self.stoi[t] for t in SPECIALS)

    @classmethod
    def from_sequences(cls, sequences: Iterable[Sequence[str]]) -> Vocab:
        return cls(t for seq in sequences for t in seq)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Sequence[str], bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int], strip: bool = True) -> list[str]:
        """Ids -> tokens; with ``strip``, drop ``<bos>``/``<pad>`` and stop at the first ``<eos>``."""
        tokens = []
        for i in ids:
            i = int(i)
            if strip and i == self.eos_id:
                break
            if strip and i in (self.pad_id, self.bos_id):
                continue
            tokens.append(self.itos[i])
        return tokens


def copy_pairs(n: int, min_len: int = 3, max_len: int = 10, n_symbols: int = 10, seed: int = 0) -> list[Pair]:
    """``n`` random symbol sequences paired with themselves."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        seq = [str(rng.randrange(n_symbols)) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((seq, list(seq)))
    return pairs


def reverse_pairs(n: int, min_len: int = 3, max_len: int = 10, n_symbols: int = 10, seed: int = 0) -> list[Pair]:
    """``n`` random symbol sequences paired with their reversal."""
    return [(src, src[::-1]) for src, _ in copy_pairs(n, min_len, max_len, n_symbols, seed)]


MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def written_date(day: datetime.date, style: int) -> list[str]:
    """One of four written forms of ``day``, as word tokens with digits split into characters."""
    d, m, y = list(str(day.day)), MONTHS[day.month - 1], list(str(day.year))
    weekday = WEEKDAYS[day.weekday()]
    forms = (
        [weekday, ","] + d + [m] + y,  # tuesday , 3 march 1998
        d + [m] + y,  # 3 march 1998
        [m] + d + [","] + y,  # march 3 , 1998
        [weekday, ",", m] + d + [","] + y,  # tuesday , march 3 , 1998
    )
    return forms[style]


def date_pairs(n: int, seed: int = 0, first_year: int = 1900, last_year: int = 2099) -> list[Pair]:
    """Written dates -> ISO dates, e.g. ``tuesday , 3 march 1998`` -> ``1 9 9 8 - 0 3 - 0 3`` (characters)."""
    rng = random.Random(seed)
    start = datetime.date(first_year, 1, 1).toordinal()
    end = datetime.date(last_year, 12, 31).toordinal()
    pairs = []
    for _ in range(n):
        day = datetime.date.fromordinal(rng.randint(start, end))
        pairs.append((written_date(day, rng.randrange(4)), list(day.isoformat())))
    return pairs


def split_pairs(pairs: list[Pair], n_test: int, by: str = "source") -> tuple[list[Pair], list[Pair]]:
    """Hold out the last ``n_test`` pairs; drop the training pairs whose source (``by="source"``) or whose target
    (``by="target"``) occurs among them. With dates, ``by="target"`` keeps every held-out date out of training in
    all its written styles, not only in the style it is tested in."""
    if by not in ("source", "target"):
        raise ValueError(f'by must be "source" or "target", got {by!r}')
    if not 0 < n_test < len(pairs):
        raise ValueError(f"n_test must lie in [1, {len(pairs) - 1}] for {len(pairs)} pairs, got {n_test}")
    test = pairs[-n_test:]
    side = 0 if by == "source" else 1
    held_out = {tuple(pair[side]) for pair in test}
    train = [p for p in pairs[:-n_test] if tuple(p[side]) not in held_out]
    return train, test


@dataclass
class Batch:
    """Padded ids: ``src (B, S)``, decoder input ``tgt_in (B, T)`` = <bos> y, target ``tgt_out (B, T)`` = y <eos>."""

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device))


def pad(sequences: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Right-pad integer sequences to the longest one: ``(B, max length)``."""
    if len(sequences) == 0:
        raise ValueError("cannot pad an empty list of sequences")
    longest = max(len(s) for s in sequences)
    out = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    for i, s in enumerate(sequences):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def make_batch(pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab) -> Batch:
    """Encode and pad a list of (source, target) token pairs for teacher forcing (targets shifted by one)."""
    src = pad([src_vocab.encode(s) for s, _ in pairs], src_vocab.pad_id)  # (B, S)
    tgt = pad([tgt_vocab.encode(t, bos=True, eos=True) for _, t in pairs], tgt_vocab.pad_id)  # (B, T + 1)
    return Batch(src, tgt[:, :-1], tgt[:, 1:])


def random_batches(pairs: Sequence[Pair], batch_size: int, src_vocab: Vocab, tgt_vocab: Vocab, seed: int = 0):
    """An endless stream of batches drawn by shuffling ``pairs`` anew each epoch (seeded)."""
    if batch_size < 1 or len(pairs) == 0:
        raise ValueError(f"need batch_size >= 1 and some pairs, got batch_size={batch_size}, {len(pairs)} pairs")
    rng = random.Random(seed)
    order = list(range(len(pairs)))
    while True:
        rng.shuffle(order)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            yield make_batch([pairs[j] for j in order[i : i + batch_size]], src_vocab, tgt_vocab)
