"""The prose of the whole Python 3.11 documentation as a stream of characters: chapter 14's corpus.

The text (4.6 million characters in 492 documents, PSF License) ships with tfm, compressed
(``corpora/python_docs.txt.xz``, written once by ``tools/corpus/make_docs_corpus.py`` from Debian's python3.11-doc, so
that every machine and Colab read the same bytes). It is about twenty times the small corpus of chapters 12 and 13
(:mod:`tfm.corpus`), which it contains.

A **character** here is one Unicode character of the text, spaces included; paragraphs end with a newline ``"\\n"``.
Characters that occur fewer than :data:`RARE` times in the training text become one symbol, ``UNKNOWN`` (id 0).

The split is by whole documents: in path order, every tenth document is held out, alternately for **validation**
(choosing a model, stopping its training) and for the **test** (the figures the chapter reports). No paragraph occurs
twice in the corpus, so no held-out paragraph is also a training paragraph; :func:`shared_runs` measures how much
shorter text the two still share. Training subsets of any size are prefixes of the training documents in one fixed
shuffled order, so that a smaller subset is part of every larger one.
"""

from __future__ import annotations

import lzma
import random
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import numpy as np
import torch
from torch import Tensor

from tfm.corpus import sections

CORPUS_FILE = "python_docs.txt.xz"
HELD_OUT_EVERY = 10  # every tenth document is held out
RARE = 50  # a character seen fewer times in training is UNKNOWN
UNKNOWN = "\ufffd"
SHUFFLE_SEED = 0  # the order in which training documents enter the subsets


@cache
def documents() -> dict[str, tuple[str, ...]]:
    """Document name (its path in the documentation) -> its paragraphs, in the file's (path) order."""
    with lzma.open(files("tfm").joinpath("corpora", CORPUS_FILE).open("rb"), "rt", encoding="utf-8") as f:
        return sections(f.read())


def split() -> dict[str, tuple[str, ...]]:
    """The document names of each part: ``{"train": ..., "validation": ..., "test": ...}``; training documents in
    the fixed shuffled order of the subsets."""
    names = list(documents())
    held_out = names[HELD_OUT_EVERY - 1::HELD_OUT_EVERY]
    train = [n for n in names if n not in set(held_out)]
    random.Random(SHUFFLE_SEED).shuffle(train)
    return {"train": tuple(train), "validation": tuple(held_out[0::2]), "test": tuple(held_out[1::2])}


def text(names: tuple[str, ...]) -> str:
    """The documents ``names``, one paragraph a line, each paragraph ending with a newline."""
    docs = documents()
    return "".join(p + "\n" for name in names for p in docs[name])


@dataclass(frozen=True)
class CharCorpus:
    """The corpus as character ids: ``alphabet[i]`` is the character of id i (id 0: UNKNOWN); ``train``,
    ``validation`` and ``test`` streams ``(N,)``."""

    alphabet: str
    train: Tensor
    validation: Tensor
    test: Tensor

    @property
    def n_vocab(self) -> int:
        return len(self.alphabet)

    def encode(self, string: str) -> Tensor:
        """Character ids ``(N,)`` of ``string`` (UNKNOWN for a character outside the alphabet)."""
        return _encode(string, self.alphabet)

    def decode(self, ids) -> str:
        return "".join(self.alphabet[i] for i in (ids.tolist() if isinstance(ids, Tensor) else ids))

    def training_subset(self, n_chars: int) -> Tensor:
        """The first ``n_chars`` characters of the training stream (documents in the subsets' shuffled order)."""
        if not 0 < n_chars <= len(self.train):
            raise ValueError(f"a training subset holds between 1 and {len(self.train):,} characters (the whole "
                             f"training text), got {n_chars:,}")
        return self.train[:n_chars]


@cache
def char_corpus() -> CharCorpus:
    """The corpus of :func:`split` as character ids (cached)."""
    parts = split()
    train_text = text(parts["train"])
    counts = Counter(train_text)
    alphabet = UNKNOWN + "".join(sorted(c for c, n in counts.items() if n >= RARE))
    return CharCorpus(alphabet, _encode(train_text, alphabet), _encode(text(parts["validation"]), alphabet),
                      _encode(text(parts["test"]), alphabet))


def _encode(string: str, alphabet: str) -> Tensor:
    """Ids ``(N,)`` of the characters of ``string`` in ``alphabet`` (0 for any character not in it)."""
    codes = np.frombuffer(string.encode("utf-32-le"), dtype=np.uint32)  # (N,): code points
    known = np.array(sorted(ord(c) for c in alphabet[1:]), dtype=np.uint32)
    ids_of_known = np.array([alphabet.index(chr(c)) for c in known], dtype=np.int64)
    where = np.searchsorted(known, codes).clip(max=len(known) - 1)
    return torch.from_numpy(np.where(known[where] == codes, ids_of_known[where], 0))


def shared_runs(train: Tensor, held_out: Tensor, n: int = 32, sample: int = 20_000, seed: int = 0) -> float:
    """The share of runs of ``n`` consecutive held-out ids (``sample`` of them, at random places) that occur anywhere
    in ``train``: how much held-out text a model could have seen verbatim (a leakage check)."""
    if len(held_out) <= n or len(train) < n:
        raise ValueError(f"both streams must be longer than n = {n}")

    def hashes(ids: Tensor) -> np.ndarray:  # a polynomial hash (mod 2**64) of every run of n ids, (N - n + 1,)
        ids = ids.numpy().astype(np.uint64) + np.uint64(1)
        h = np.zeros(len(ids) - n + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(n):
                h = h * np.uint64(1_000_003) + ids[j:len(ids) - n + 1 + j]
        return h

    held = hashes(held_out)
    picked = held[np.random.default_rng(seed).integers(0, len(held), min(sample, len(held)))]
    known = np.sort(hashes(train))  # (N - n + 1,): sorted, so that each picked run is a binary search
    where = np.searchsorted(known, picked).clip(max=len(known) - 1)
    return float((known[where] == picked).mean())
