"""Count-based language models, the baselines a neural language model must beat: uniform, unigram and interpolated
Kneser–Ney n-grams (Kneser & Ney, 1995; in the interpolated form of Chen & Goodman, 1999).

Interpolated Kneser–Ney for the highest order n, with a history h of n - 1 tokens and h' its last n - 2:

    P(w | h) = max(c(h, w) - D, 0) / c(h)  +  D · N1+(h •) / c(h) · P_cont(w | h')

where c counts n-grams in the training text and N1+(h •) is the number of distinct tokens seen after h. A history
never seen falls back to P_cont(w | h') entirely. The lower orders use *continuation* counts instead of counts: how
many distinct tokens precede an n-gram (N1+(• h' w)), so that a token frequent only after one history ("Kong" after
"Hong") gets little weight where that history is absent. The lowest order is interpolated with the uniform
distribution, so that every token of the vocabulary, seen or not, has a probability above zero. One discount D per
order (0.75 by default) is subtracted from every positive count.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence


class KneserNey:
    """An interpolated Kneser–Ney model of ``order`` n over token ids ``0 .. n_vocab - 1``.

    ``fit`` takes sequences (lists of ids); no n-gram crosses from one sequence into the next. ``prob(history, w)``
    gives P(w | the last n - 1 ids of history); ``cross_entropy(sequences)`` the mean negative log-probability (nats)
    of every token that has ``order - 1`` tokens before it in its sequence (the first tokens are not scored, as a
    neural model with the same context would not be either, unless ``score_from`` says otherwise).
    """

    def __init__(self, order: int, n_vocab: int, discount: float = 0.75):
        if order < 1:
            raise ValueError(f"order must be >= 1 (1 = unigram), got {order}")
        if n_vocab < 1:
            raise ValueError(f"n_vocab must be positive, got {n_vocab}")
        if not 0 < discount < 1:
            raise ValueError(f"the discount must lie strictly between 0 and 1, got {discount}")
        self.order, self.n_vocab, self.discount = order, n_vocab, discount
        # counts[k][history][w] for histories of k tokens (k = 0 .. order - 1): raw counts at the top order,
        # continuation counts (distinct left neighbours) below it; filled in by fit
        self.counts: list[dict[tuple, dict[int, int]]] = []
        self.totals: list[dict[tuple, int]] = []
        self.followers: list[dict[tuple, int]] = []

    def fit(self, sequences: Iterable[Sequence[int]]) -> KneserNey:
        n = self.order
        top: Counter = Counter()  # n-gram -> count
        grams: list[set] = [set() for _ in range(n + 1)]  # grams[m]: the distinct m-grams, for m = 2 .. n
        for seq in sequences:
            seq = list(seq)
            bad = [t for t in seq if not 0 <= t < self.n_vocab]
            if bad:
                raise ValueError(f"token ids must lie in [0, {self.n_vocab}), got {bad[:5]}")
            top.update(zip(*(seq[j:] for j in range(n)), strict=False))
            for m in range(2, n + 1):
                grams[m].update(zip(*(seq[j:] for j in range(m)), strict=False))
        self.counts = [defaultdict(dict) for _ in range(n)]
        for gram, count in top.items():  # the top order: raw counts
            self.counts[n - 1][gram[:-1]][gram[-1]] = count
        for m in range(2, n + 1):  # continuation count of the (m - 1)-gram g[1:]: how many distinct tokens precede it
            level = self.counts[m - 2]
            for gram in grams[m]:
                after = level[gram[1:-1]]
                after[gram[-1]] = after.get(gram[-1], 0) + 1
        self.totals = [{h: sum(c.values()) for h, c in level.items()} for level in self.counts]
        self.followers = [{h: len(c) for h, c in level.items()} for level in self.counts]
        return self

    def _prob(self, history: tuple, w: int, k: int) -> float:
        """P at the level whose histories have k tokens (history has at least k tokens)."""
        h = history[len(history) - k :] if k else ()
        lower = 1.0 / self.n_vocab if k == 0 else self._prob(history, w, k - 1)
        total = self.totals[k].get(h, 0)
        if total == 0:
            return lower
        count = self.counts[k][h].get(w, 0)
        return (max(count - self.discount, 0.0) + self.discount * self.followers[k][h] * lower) / total

    def prob(self, history: Sequence[int], w: int) -> float:
        """P(w | history), from the last ``order - 1`` ids of ``history`` (fewer at the start of a sequence)."""
        if not self.totals:
            raise RuntimeError("fit the model before asking for probabilities")
        if not 0 <= w < self.n_vocab:
            raise ValueError(f"token id {w} is outside the vocabulary [0, {self.n_vocab})")
        history = tuple(history)[-(self.order - 1) :] if self.order > 1 else ()
        return self._prob(history, w, len(history))

    def cross_entropy(self, sequences: Iterable[Sequence[int]], score_from: int | None = None) -> float:
        """Mean -log P (nats) over the tokens at positions >= ``score_from`` (default ``order - 1``) of each
        sequence."""
        start = self.order - 1 if score_from is None else score_from
        total, n = 0.0, 0
        for seq in sequences:
            seq = list(seq)
            for i in range(start, len(seq)):
                total -= math.log(self.prob(seq[max(0, i - self.order + 1) : i], seq[i]))
                n += 1
        if n == 0:
            raise ValueError(f"no token to score: every sequence is shorter than {start + 1} tokens")
        return total / n


def unigram_cross_entropy(train: Iterable[Sequence[int]], test: Iterable[Sequence[int]], n_vocab: int,
                          smoothing: float = 1.0) -> float:
    """Nats per token of the add-``smoothing`` unigram model of ``train`` on every token of ``test``."""
    counts = Counter(t for seq in train for t in seq)
    total = sum(counts.values()) + smoothing * n_vocab
    scored = [t for seq in test for t in seq]
    return -sum(math.log((counts[t] + smoothing) / total) for t in scored) / len(scored)
