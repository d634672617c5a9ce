"""Byte-pair encoding (Sennrich et al., 2016) from scratch: learn merges from word counts, then split words with them.

Training starts from single characters and repeatedly merges the most frequent adjacent pair of symbols into a new
symbol. The end of a word is marked by ``end_of_word`` glued to its last character (``"</w>"`` by default), so
``decode`` can put the spaces back.

Ties between equally frequent pairs go to the pair whose two symbols have the smallest ids, which is also the rule of
Hugging Face ``tokenizers``. The ids of the initial symbols therefore decide the order of tied merges. Here they are:
the special tokens, every character by code point, then the end-of-word symbols (``"s</w>"``) by code point.
``tokenizers`` numbers its special tokens and characters the same way but its end-of-word symbols in the iteration
order of a hash map, which changes from one process to the next. Given that order (``alphabet=``), ``train_bpe``
learns exactly the merges of ``tokenizers`` (``tests/test_bpe.py``).
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

PRE_TOKEN = re.compile(r"\w+|[^\w\s]+")  # runs of letters/digits, or runs of punctuation (HF's Whitespace)
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def pre_tokenize(text: str) -> list[str]:
    """Split text into words before BPE: runs of word characters, and runs of other non-space characters."""
    return PRE_TOKEN.findall(text)


def word_counts(texts: Iterable[str]) -> Counter:
    """How often each pre-token occurs in ``texts``."""
    if isinstance(texts, str):
        raise TypeError("word_counts takes an iterable of texts (e.g. a list of paragraphs), not one string")
    counts: Counter = Counter()
    for text in texts:
        counts.update(pre_tokenize(text))
    return counts


def symbols_of(word: str, end_of_word: str = "</w>") -> list[str]:
    """A word as its initial symbols: one per character, the end-of-word marker glued to the last one."""
    if not word:
        raise ValueError("cannot split an empty word")
    return list(word[:-1]) + [word[-1] + end_of_word]


def initial_alphabet(counts: Iterable[str], end_of_word: str = "</w>") -> list[str]:
    """The initial symbols of ``counts``' words in id order: every character by code point, then every end-of-word
    symbol by code point (a character seen only at the end of words is in both)."""
    words = [w for w in counts if w]
    return sorted({ch for w in words for ch in w}) + sorted({w[-1] + end_of_word for w in words})


@dataclass
class BPETokenizer:
    """A learned vocabulary (``id -> token``) and its merges in the order they were learned."""

    vocab: list[str]
    merges: list[tuple[str, str]]
    end_of_word: str = "</w>"
    special_tokens: tuple[str, ...] = SPECIAL_TOKENS
    unk_token: str = "[UNK]"
    ids: dict[str, int] = field(init=False, repr=False)
    ranks: dict[tuple[str, str], int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        if len(self.ids) != len(self.vocab):
            raise ValueError("the vocabulary lists a token twice")
        self.ranks = {pair: i for i, pair in enumerate(self.merges)}

    def __len__(self) -> int:
        return len(self.vocab)

    def id_of(self, token: str) -> int:
        if token not in self.ids:
            raise KeyError(f"{token!r} is not in the vocabulary of {len(self)} tokens")
        return self.ids[token]

    def first_merges(self, n_merges: int) -> BPETokenizer:
        """The tokenizer that training with ``n_merges`` merges gives: the first merges and the tokens they made."""
        if not 0 <= n_merges <= len(self.merges):
            raise ValueError(f"n_merges must be between 0 and {len(self.merges)}, got {n_merges}")
        made = {a + b for a, b in self.merges}
        kept = {a + b for a, b in self.merges[:n_merges]}
        vocab = [t for t in self.vocab if t not in made or t in kept]
        return BPETokenizer(vocab, self.merges[:n_merges], self.end_of_word, self.special_tokens, self.unk_token)

    def split_word(self, word: str) -> list[str]:
        """The tokens of one pre-token: apply the learned merges, lowest rank first (leftmost first among equal
        ranks), until none applies."""
        symbols = symbols_of(word, self.end_of_word)
        never = len(self.ranks)
        while len(symbols) > 1:
            rank, i = min((self.ranks.get(pair, never), i) for i, pair in enumerate(pairwise(symbols)))
            if rank == never:
                break
            symbols[i: i + 2] = [symbols[i] + symbols[i + 1]]
        return symbols

    def tokenize(self, text: str) -> list[str]:
        """Text -> tokens; a symbol the vocabulary lacks (an unseen character) becomes ``unk_token``."""
        tokens = [token for word in pre_tokenize(text) for token in self.split_word(word)]
        unknown = [t for t in tokens if t not in self.ids]
        if unknown and self.unk_token not in self.ids:
            raise KeyError(f"{unknown[0]!r} is not in the vocabulary, which has no unknown token {self.unk_token!r}")
        return [t if t in self.ids else self.unk_token for t in tokens]

    def encode(self, text: str) -> list[int]:
        """Text -> token ids."""
        return [self.ids[t] for t in self.tokenize(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text; words are separated by single spaces (so "a, b" comes back as "a , b"). Special tokens
        are dropped: an ``unk_token`` that stood for a word's last character loses that word's end as well."""
        tokens = []
        for i in ids:
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"token id {i} is outside the vocabulary (ids 0..{len(self.vocab) - 1})")
            tokens.append(self.vocab[i])
        text = "".join(t for t in tokens if t not in self.special_tokens)
        return text.replace(self.end_of_word, " ").strip()


def train_bpe(counts: Counter | dict[str, int], n_merges: int, end_of_word: str = "</w>",
              special_tokens: Sequence[str] = SPECIAL_TOKENS, min_count: int = 2,
              alphabet: Sequence[str] | None = None) -> BPETokenizer:
    """Learn up to ``n_merges`` merges from ``counts`` (pre-token -> count); stop early when no pair occurs
    ``min_count`` times. The vocabulary is the special tokens, then ``alphabet`` (the initial symbols in id order;
    default :func:`initial_alphabet`), then one new token per merge (a merge whose result is already a token adds
    none). Of equally frequent pairs, the one whose symbols have the smallest ids is merged first."""
    if n_merges < 0:
        raise ValueError(f"n_merges must be >= 0, got {n_merges}")
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if not end_of_word:
        raise ValueError("end_of_word must be a non-empty marker such as '</w>'")
    words = [(symbols_of(w, end_of_word), c) for w, c in counts.items() if w and c > 0]
    if not words:
        raise ValueError("counts holds no word to learn from")
    vocab = list(special_tokens) + list(initial_alphabet(counts, end_of_word) if alphabet is None else alphabet)
    ids = {token: i for i, token in enumerate(vocab)}
    missing = sorted({s for symbols, _ in words for s in symbols} - ids.keys())
    if missing:
        raise ValueError(f"alphabet lacks the initial symbols {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if len(ids) != len(vocab):
        raise ValueError("special_tokens and alphabet list a token twice")

    # Pair counts, the words each pair occurs in, and a heap of (-count, id_a, id_b, a, b); stale entries are skipped
    pair_counts: Counter = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for w, (symbols, c) in enumerate(words):
        for pair in pairwise(symbols):
            pair_counts[pair] += c
            where.setdefault(pair, set()).add(w)
    heap = [(-c, ids[a], ids[b], a, b) for (a, b), c in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while len(merges) < n_merges and heap:
        negative, _, _, a, b = heapq.heappop(heap)
        if pair_counts.get((a, b), 0) != -negative:
            continue  # stale: this pair's count changed after the entry was pushed
        if -negative < min_count:
            break
        merged = a + b
        merges.append((a, b))
        if merged not in ids:
            ids[merged] = len(vocab)
            vocab.append(merged)
        changed: set[tuple[str, str]] = set()
        for w in where.pop((a, b)):
            symbols, c = words[w]
            for pair in pairwise(symbols):
                pair_counts[pair] -= c
                changed.add(pair)
            words[w] = (merge_pair(symbols, a, b), c)
            for pair in pairwise(words[w][0]):
                pair_counts[pair] += c
                where.setdefault(pair, set()).add(w)
                changed.add(pair)
        for pair in changed:
            count = pair_counts[pair]
            if count > 0:
                heapq.heappush(heap, (-count, ids[pair[0]], ids[pair[1]], pair[0], pair[1]))
            else:
                del pair_counts[pair]
    return BPETokenizer(vocab, merges, end_of_word, tuple(special_tokens))


def merge_pair(symbols: list[str], a: str, b: str) -> list[str]:
    """``symbols`` with every occurrence of ``a`` followed by ``b`` replaced by ``a + b``, left to right."""
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out
