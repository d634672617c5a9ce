"""Interpolated modified Kneser–Ney (Chen & Goodman, 1998): the strongest count model of its time, and the baseline a
neural language model of real text must beat. Counted with NumPy, so that it fits millions of tokens in seconds.

For a history h of k tokens and h' its last k - 1:

    P(w | h) = max(c(h w) - D(c(h w)), 0) / c(h)  +  γ(h) · P(w | h'),
    γ(h)     = (D1 · N1(h •) + D2 · N2(h •) + D3+ · N3+(h •)) / c(h),

where c(h) = Σ_w c(h w), and N1(h •), N2(h •), N3+(h •) count the tokens seen after h exactly once, twice, three times
or more. A history never seen falls back to P(w | h') entirely; below the empty history is the uniform distribution,
so that every token of the vocabulary has a probability above zero.

*Which counts.* At the top level, the history the model is given, c is the raw count. At every level below it, c is
the **continuation count** N1+(• h w): how many distinct tokens precede h w in the training text. A token frequent
only after one history ("Kong" after "Hong") then gets little weight where that history is absent. A model of order n
asked about a token with fewer than n - 1 tokens before it (the start of a window) is the model of the order it has a
history for, so its top level uses raw counts too: a continuation count is the wrong estimate of P(w | h) for the
history one actually has.

*The discounts*, three per level and per kind of count (raw, continuation), come from that level's count-of-counts
n1 .. n4 of the *training* text (n_r: how many distinct grams have count r), as Chen & Goodman estimate them:

    Y = n1 / (n1 + 2 n2),   D1 = 1 - 2Y n2/n1,   D2 = 2 - 3Y n3/n2,   D3+ = 3 - 4Y n4/n3.

Where a count-of-counts is zero, or a discount comes out zero or negative (a level with few distinct grams, such as
the unigram level of a character vocabulary, has irregular n1 .. n4: n4 > n3 makes D3+ negative, and a negative
discount would give negative probabilities), the level falls back to one discount Y for all three (absolute
discounting, Ney et al.'s estimate), or 0.5 if n1 or n2 is zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


def estimate_discounts(counts: np.ndarray) -> tuple[float, float, float]:
    """Chen & Goodman's (D1, D2, D3+) from the positive ``counts`` of one level's distinct grams."""
    n1, n2, n3, n4 = (int((counts == r).sum()) for r in (1, 2, 3, 4))
    if n1 == 0 or n2 == 0:
        return 0.5, 0.5, 0.5
    y = n1 / (n1 + 2 * n2)
    if n3 == 0 or n4 == 0:
        return y, y, y
    discounts = 1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3
    if min(discounts) <= 0:  # irregular count-of-counts (a level with few distinct grams): one discount Y
        return y, y, y
    return discounts


class _Level:
    """One level's table (grams of k + 1 tokens, histories of k), for one kind of count: each gram's count and
    history, each history's total and its discounted mass γ·c(h)."""

    def __init__(self, counts: np.ndarray, history: np.ndarray, n_histories: int):
        positive = counts > 0
        self.discounts = estimate_discounts(counts[positive])
        d = np.array([0.0, *self.discounts])
        self.discount = d[np.minimum(counts, 3)]  # (G,): the discount of each gram's count
        self.counts = counts.astype(np.float64)
        self.total = np.bincount(history, weights=self.counts, minlength=n_histories)  # (H,)
        self.mass = np.bincount(history, weights=self.discount * positive, minlength=n_histories)  # (H,)


class ModifiedKneserNey:
    """Interpolated modified Kneser–Ney of ``order`` n over token ids ``0 .. n_vocab - 1`` (module docstring).

    ``fit(ids)`` counts one training stream ``(N,)`` (an n-gram may cross a paragraph boundary, as a Transformer's
    window does). ``losses(ids)`` gives -log P of every token of a stream from the ``order - 1`` tokens before it
    (fewer at the start); ``window_losses(stream, length)`` scores windows exactly as a Transformer with that context
    sees them; ``prob`` and ``distribution`` answer one history at a time.
    """

    def __init__(self, order: int, n_vocab: int):
        if order < 1:
            raise ValueError(f"order must be >= 1 (1 = unigram), got {order}")
        if n_vocab < 1:
            raise ValueError(f"n_vocab must be positive, got {n_vocab}")
        self.order, self.n_vocab = order, n_vocab
        self.keys: list[np.ndarray] = []  # keys[k]: sorted codes of the distinct grams of k + 1 tokens
        self.raw: list[_Level] = []
        self.continuation: list[_Level] = []  # levels 0 .. order - 2

    def _ids(self, ids) -> np.ndarray:
        array = np.asarray(ids.cpu() if isinstance(ids, Tensor) else ids, dtype=np.int64).reshape(-1)
        if array.size and (array.min() < 0 or array.max() >= self.n_vocab):
            bad = array[(array < 0) | (array >= self.n_vocab)][:5].tolist()
            raise ValueError(f"token ids must lie in [0, {self.n_vocab}), got {bad}")
        return array

    def fit(self, ids: Sequence[int] | np.ndarray | Tensor) -> ModifiedKneserNey:
        """Count the training stream ``ids (N,)``; returns the model."""
        ids = self._ids(ids)
        if len(ids) < self.order:
            raise ValueError(f"a training stream of {len(ids)} ids is shorter than the order {self.order}")
        grams = ids  # grams[i]: the id of the gram of k + 1 tokens ending at position i
        gram_ids, histories = [], []
        for k in range(self.order):
            if k == 0:
                codes = ids
            else:  # a gram of k + 1 tokens: (the id of its first k tokens, its last token)
                codes = np.full(len(ids), -1, dtype=np.int64)
                codes[k:] = grams[k - 1:-1] * self.n_vocab + ids[k:]
            valid = codes >= 0
            keys, inverse = (t.numpy() for t in torch.unique(torch.from_numpy(codes[valid]), return_inverse=True))
            current = np.full(len(ids), -1, dtype=np.int64)
            current[valid] = inverse
            history = keys // self.n_vocab if k else np.zeros(len(keys), dtype=np.int64)
            self.keys.append(keys)
            gram_ids.append(current)
            histories.append(history)
            grams = current
        self.raw, self.continuation = [], []
        for k in range(self.order):
            n_histories = len(self.keys[k - 1]) if k else 1
            counts = np.bincount(gram_ids[k][gram_ids[k] >= 0], minlength=len(self.keys[k]))
            self.raw.append(_Level(counts, histories[k], n_histories))
            if k < self.order - 1:  # continuation count of a gram: how many distinct grams one token longer end in it
                longer = gram_ids[k + 1]
                valid = longer >= 0
                suffix = np.empty(len(self.keys[k + 1]), dtype=np.int64)  # each longer gram's last k + 1 tokens
                suffix[longer[valid]] = gram_ids[k][valid]
                counts = np.bincount(suffix, minlength=len(self.keys[k]))
                self.continuation.append(_Level(counts, histories[k], n_histories))
        return self

    def _lookup(self, k: int, codes: np.ndarray) -> np.ndarray:
        """The ids at level k of grams given by their codes (-1: not in the training text)."""
        keys = self.keys[k]
        where = np.searchsorted(keys, codes).clip(max=len(keys) - 1)
        found = (codes >= 0) & (keys[where] == codes)
        return np.where(found, where, -1)

    def _gram_ids(self, ids: np.ndarray, upto: int) -> list[np.ndarray]:
        """For every position of ``ids`` (..., N), the training id of the gram of k + 1 tokens ending there (along
        the last axis), k = 0 .. upto; -1 where there is none."""
        result = []
        grams = None
        for k in range(upto + 1):
            if k == 0:
                codes = ids.copy()
            else:
                codes = np.full(ids.shape, -1, dtype=np.int64)
                before = grams[..., k - 1:-1]
                codes[..., k:] = np.where(before >= 0, before * self.n_vocab + ids[..., k:], -1)
            grams = self._lookup(k, codes)
            result.append(grams)
        return result

    def _probs(self, ids: np.ndarray, history: int, grams: list[np.ndarray] | None = None) -> np.ndarray:
        """P of each token of ``ids`` (..., N) from exactly ``history`` tokens before it along the last axis
        (positions with fewer: NaN); ``grams``: :meth:`_gram_ids` of ``ids`` up to at least ``history``."""
        grams = self._gram_ids(ids, history) if grams is None else grams
        p = np.full(ids.shape, 1.0 / self.n_vocab)
        for k in range(history + 1):
            table = self.raw[k] if k == history else self.continuation[k]
            g = grams[k]  # (..., N): the gram of k + 1 tokens ending at each position
            if k == 0:
                h = np.zeros(ids.shape, dtype=np.int64)
            else:
                h = np.full(ids.shape, -1, dtype=np.int64)
                h[..., 1:] = grams[k - 1][..., :-1]  # the history: the gram of k tokens ending just before
            seen = h >= 0
            total = np.where(seen, table.total[h.clip(min=0)], 0.0)
            mass = np.where(seen, table.mass[h.clip(min=0)], 0.0)
            count = np.where(g >= 0, table.counts[g.clip(min=0)], 0.0)
            discount = np.where(g >= 0, table.discount[g.clip(min=0)], 0.0)
            safe = np.where(total > 0, total, 1.0)
            p = np.where(total > 0, (np.maximum(count - discount, 0.0) + mass * p) / safe, p)
        p[..., :history] = np.nan
        return p

    def _check_fitted(self) -> None:
        if not self.keys:
            raise RuntimeError("fit the model before asking for probabilities")

    def losses(self, ids: Sequence[int] | np.ndarray | Tensor, history: int | None = None) -> Tensor:
        """-log P (nats) of every token of the stream ``ids (N,)`` from the ``history`` tokens before it (default
        ``order - 1``; fewer at the start of the stream, where the model of that shorter order answers): ``(N,)``,
        float64."""
        self._check_fitted()
        ids = self._ids(ids)
        top = self.order - 1 if history is None else history
        if not 0 <= top <= self.order - 1:
            raise ValueError(f"a model of order {self.order} reads at most {self.order - 1} tokens of history, "
                             f"got history={history}")
        result = -np.log(self._probs(ids, top, self._gram_ids(ids, top)))
        for j in range(min(top, len(ids))):  # the first tokens have only j before them
            result[j] = -math.log(self._probs(ids[:j + 1], j)[j])
        return torch.from_numpy(result)

    def window_losses(self, stream: Tensor, length: int, stride: int | None = None) -> Tensor:
        """-log P (nats) of every next id of the windows of ``length`` ids starting every ``stride`` ids (default
        ``length``) of ``stream``, from the ids of the same window only, as a Transformer with that context sees
        them: position t predicts with t + 1 ids, or ``order - 1`` if fewer. ``(n, T)``, float64."""
        self._check_fitted()
        ids = self._ids(stream)
        stride = length if stride is None else stride
        if length < 1 or not 1 <= stride <= length:
            raise ValueError(f"need length >= 1 and stride in [1, length], got length={length}, stride={stride}")
        if len(ids) < length + 1:
            raise ValueError(f"the stream ({len(ids)} ids) is shorter than one window of {length} + 1")
        n = (len(ids) - 1 - length) // stride + 1
        starts = np.arange(n) * stride  # (n,)
        t = np.arange(length)  # (T,)
        targets = starts[:, None] + t + 1  # (n, T): the position each window position predicts
        k = np.minimum(t + 1, self.order - 1)  # (T,): the history it has
        grams = self._gram_ids(ids, int(k.max()))
        by_history = {j: self._probs(ids, j, grams) for j in np.unique(k).tolist()}
        probs = np.stack([by_history[int(j)][targets[:, i]] for i, j in enumerate(k)], axis=1)  # (n, T)
        return torch.from_numpy(-np.log(probs))

    def row_losses(self, rows: np.ndarray | Tensor) -> Tensor:
        """-log P (nats) of ``rows[:, t + 1]`` from ``rows[:, :t + 1]``, each row on its own (history min(t + 1,
        order - 1)), as a Transformer scores a batch of windows: ``rows (n, L)`` -> ``(n, L - 1)``, float64."""
        self._check_fitted()
        rows = np.asarray(rows.cpu() if isinstance(rows, Tensor) else rows, dtype=np.int64)
        if rows.ndim != 2 or rows.shape[1] < 2:
            raise ValueError(f"rows must have shape (n, L) with L >= 2, got {rows.shape}")
        self._ids(rows)  # the range check
        length = rows.shape[1] - 1
        k = np.minimum(np.arange(length) + 1, self.order - 1)  # (L - 1,): the history of each prediction
        grams = self._gram_ids(rows, int(k.max()))
        by_history = {j: self._probs(rows, j, grams) for j in np.unique(k).tolist()}
        probs = np.stack([by_history[int(j)][:, t + 1] for t, j in enumerate(k)], axis=1)  # (n, L - 1)
        return torch.from_numpy(-np.log(probs))

    def distribution(self, history: Sequence[int]) -> Tensor:
        """P(w | history) for every w of the vocabulary, from the last ``order - 1`` ids of ``history``: ``(V,)``."""
        self._check_fitted()
        history = self._ids(history)[-(self.order - 1):] if self.order > 1 else np.zeros(0, dtype=np.int64)
        j = len(history)
        rows = np.concatenate([np.repeat(history[None], self.n_vocab, 0), np.arange(self.n_vocab)[:, None]], 1)
        return torch.tensor([self._probs(row, j)[j] for row in rows])

    def prob(self, history: Sequence[int], w: int) -> float:
        """P(w | the last ``order - 1`` ids of history)."""
        self._check_fitted()
        if not 0 <= w < self.n_vocab:
            raise ValueError(f"token id {w} is outside the vocabulary [0, {self.n_vocab})")
        history = list(self._ids(history))[-(self.order - 1):] if self.order > 1 else []
        return float(self._probs(np.array([*history, w], dtype=np.int64), len(history))[-1])
