"""tfm.kneser_ney: modified Kneser-Ney against probabilities computed by hand and against an independent, plain
implementation of Chen & Goodman's formulas written here; distributions that sum to 1; discounts from the training
counts; short histories scored by the model of the order they have; clear errors."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import numpy as np
import pytest
import torch

from tfm.kneser_ney import ModifiedKneserNey, estimate_discounts


def _discounts(values) -> tuple[float, float, float]:
    n = Counter(values)
    n1, n2, n3, n4 = n[1], n[2], n[3], n[4]
    if not n1 or not n2:
        return 0.5, 0.5, 0.5
    y = n1 / (n1 + 2 * n2)
    if not n3 or not n4:
        return y, y, y
    d = 1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3
    return (y, y, y) if min(d) <= 0 else d


class Reference:
    """Interpolated modified Kneser-Ney, written from the formulas with dictionaries of tuples, slowly."""

    def __init__(self, train: list[int], order: int, n_vocab: int):
        self.order, self.n_vocab = order, n_vocab
        self.raw = {m: Counter(tuple(train[i:i + m]) for i in range(len(train) - m + 1)) for m in range(1, order + 1)}
        left = defaultdict(set)
        for m in range(2, order + 1):
            for gram in self.raw[m]:
                left[gram[1:]].add(gram[0])
        self.cont = {m: Counter({g: len(v) for g, v in left.items() if len(g) == m}) for m in range(1, order)}

    def prob(self, history: tuple, w: int) -> float:
        history = tuple(history)[len(history) - min(len(history), self.order - 1):]
        j = len(history)
        p = 1.0 / self.n_vocab
        for k in range(j + 1):
            counts = self.raw[k + 1] if k == j else self.cont[k + 1]
            d1, d2, d3 = _discounts([c for c in counts.values() if c > 0])
            h = history[j - k:] if k else ()
            followers = {g[-1]: c for g, c in counts.items() if g[:-1] == h and c > 0}
            total = sum(followers.values())
            if total == 0:
                continue
            mass = sum((d1, d2, d3)[min(c, 3) - 1] for c in followers.values())
            c = followers.get(w, 0)
            discount = (0, d1, d2, d3)[min(c, 3)]
            p = (max(c - discount, 0) + mass * p) / total
        return p


def test_bigram_probabilities_computed_by_hand():
    # training 0 1 0 1 2, vocabulary 4 (3 never seen).
    model = ModifiedKneserNey(order=2, n_vocab=4).fit([0, 1, 0, 1, 2])
    # With a history, the lower level is the unigram of continuation counts: 1 follows {0}, 0 follows {1}, 2 follows
    # {1}; count-of-counts n1 = 3, n2 = 0: one discount 0.5; c(.) = 3, discounted mass 3 x 0.5.
    continuation = [(0.5 + 1.5 / 4) / 3] * 3 + [(1.5 / 4) / 3]
    # the bigram level, raw counts 01: 2, 10: 1, 12: 1; n1 = 2, n2 = 1, n3 = 0: one discount Y = 2 / (2 + 2) = 0.5
    assert model.prob([0], 1) == pytest.approx((2 - 0.5 + 0.5 * continuation[1]) / 2)
    assert model.prob([0], 3) == pytest.approx(0.5 * continuation[3] / 2)
    assert model.prob([1], 2) == pytest.approx((1 - 0.5 + 2 * 0.5 * continuation[2]) / 2)
    assert model.prob([3], 0) == pytest.approx(continuation[0])  # an unseen history falls back entirely
    assert model.prob([2, 0], 1) == model.prob([0], 1)  # only the last order - 1 tokens count
    # With no history at all (the first token of a window), the model of order 1: raw counts 0: 2, 1: 2, 2: 1;
    # n1 = 1, n2 = 2, n3 = 0: one discount Y = 1 / (1 + 4) = 0.2; c(.) = 5, discounted mass 3 x 0.2.
    raw = [(2 - 0.2 + 0.6 / 4) / 5] * 2 + [(1 - 0.2 + 0.6 / 4) / 5, (0.6 / 4) / 5]
    assert model.distribution([]).tolist() == pytest.approx(raw)


def test_discounts_from_the_count_of_counts():
    counts = np.array([1] * 10 + [2] * 4 + [3] * 3 + [4] * 2 + [9])
    y = 10 / (10 + 8)
    assert estimate_discounts(counts) == pytest.approx((1 - 2 * y * 4 / 10, 2 - 3 * y * 3 / 4, 3 - 4 * y * 2 / 3))
    assert estimate_discounts(np.array([1, 1, 2])) == pytest.approx((0.5, 0.5, 0.5))  # n3 = 0: Y for all three
    assert estimate_discounts(np.array([1, 1, 1])) == (0.5, 0.5, 0.5)  # n2 = 0
    # n1 = 2, n2 = 1, n3 = 1, n4 = 3 (few distinct grams): D3+ = 3 - 4 Y n4 / n3 = -3 < 0, so one discount Y = 0.5
    assert estimate_discounts(np.array([1, 1, 2, 3, 4, 4, 4])) == pytest.approx((0.5, 0.5, 0.5))


def test_probabilities_stay_positive_where_the_count_of_counts_is_irregular():
    # A unigram level of 6 distinct tokens with counts 1, 1, 2, 3, 4, 4 and three of 4 ... (n4 > n3): the estimated
    # D3+ would be negative and give some tokens a negative probability.
    train = [0, 1, 2, 2, 3, 3, 3] + [4] * 4 + [5] * 4 + [6] * 4
    model = ModifiedKneserNey(2, 8).fit(train)
    for history in [[], [0], [4], [7]]:
        p = model.distribution(history)
        assert p.min().item() > 0 and p.sum().item() == pytest.approx(1.0, abs=1e-12)
    reference = Reference(train, 2, 8)
    assert model.losses([4, 4, 6, 7, 2]).tolist() == pytest.approx(
        [-math.log(reference.prob(h, w)) for h, w in [((), 4), ((4,), 4), ((4,), 6), ((6,), 7), ((7,), 2)]],
        rel=1e-12)


def _stream(seed: int, n: int, vocab: int) -> list[int]:
    """Text with structure: each token usually follows from the two before it, sometimes at random."""
    rng = random.Random(seed)
    s = [rng.randrange(vocab), rng.randrange(vocab)]
    while len(s) < n:
        s.append((s[-1] + 2 * s[-2]) % vocab if rng.random() < 0.7 else rng.randrange(vocab - 1))
    return s


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_equal_to_an_independent_implementation(order):
    vocab = 7
    train, test = _stream(0, 3000, vocab), _stream(1, 60, vocab)
    model = ModifiedKneserNey(order, vocab).fit(train)
    reference = Reference(train, order, vocab)
    expected = [-math.log(reference.prob(tuple(test[max(0, i - order + 1):i]), test[i])) for i in range(len(test))]
    assert model.losses(test).tolist() == pytest.approx(expected, rel=1e-12)
    for j in range(order):  # a fixed shorter history: the model of order j + 1
        got = model.losses(test, history=j)
        assert got[j:].tolist() == pytest.approx(
            [-math.log(reference.prob(tuple(test[i - j:i]), test[i])) for i in range(j, len(test))], rel=1e-12)


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_probabilities_sum_to_one_for_every_history(order):
    vocab = 8
    model = ModifiedKneserNey(order, vocab).fit(_stream(2, 2000, vocab))
    for history in [[], [0], [5], [7], [1, 2], [7, 7], [3, 3, 3], [6, 1, 0, 2]]:
        p = model.distribution(history)
        assert p.sum().item() == pytest.approx(1.0, abs=1e-12)
        assert p.min().item() > 0  # token 7 is never seen


def test_windows_are_scored_as_a_transformer_sees_them():
    vocab, order, length = 7, 4, 10
    train, test = _stream(3, 2000, vocab), torch.tensor(_stream(4, 95, vocab))
    model = ModifiedKneserNey(order, vocab).fit(train)
    reference = Reference(train, order, vocab)
    losses = model.window_losses(test, length, stride=5)  # (n, T)
    assert losses.shape == ((95 - 1 - length) // 5 + 1, length) and losses.dtype == torch.float64
    for row in range(losses.shape[0]):
        start = row * 5
        for t in range(length):  # position t predicts test[start + t + 1] from the window's t + 1 ids before it
            window = test[start:start + t + 1].tolist()
            expected = -math.log(reference.prob(tuple(window[-(order - 1):]), int(test[start + t + 1])))
            assert losses[row, t].item() == pytest.approx(expected, rel=1e-12)


def test_rows_are_scored_each_on_its_own():
    vocab, order = 7, 4
    model = ModifiedKneserNey(order, vocab).fit(_stream(3, 2000, vocab))
    stream = torch.tensor(_stream(4, 95, vocab))
    windows = torch.stack([stream[s:s + 11] for s in range(0, 80, 5)])  # (16, 11): overlapping windows
    assert torch.equal(model.row_losses(windows), model.window_losses(stream[:86], 10, stride=5))
    with pytest.raises(ValueError, match=r"rows must have shape \(n, L\) with L >= 2"):
        model.row_losses(stream[:5])


def test_short_histories_use_raw_counts_not_continuation_counts():
    # 'b' follows only 'a' (continuation count 1) but is very frequent: with no history the order-1 model, whose
    # top level counts raw occurrences, gives it far more than the bigram model's lower level would.
    train = [0, 1] * 50 + [2, 3, 4, 0, 2, 4, 3]
    model = ModifiedKneserNey(2, 5).fit(train)
    first = model.losses([1, 1])[0].item()  # the first token has no history
    assert first == pytest.approx(-math.log(ModifiedKneserNey(1, 5).fit(train).prob([], 1)))
    continuation_only = -math.log(Reference(train, 2, 5).cont[1][(1,)] / sum(Reference(train, 2, 5).cont[1].values()))
    assert first < continuation_only - 1.0


def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="order must be >= 1"):
        ModifiedKneserNey(0, 5)
    with pytest.raises(ValueError, match="n_vocab must be positive"):
        ModifiedKneserNey(2, 0)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 5\), got \[9\]"):
        ModifiedKneserNey(2, 5).fit([1, 2, 9])
    with pytest.raises(ValueError, match="shorter than the order 3"):
        ModifiedKneserNey(3, 5).fit([1, 2])
    with pytest.raises(RuntimeError, match="fit the model"):
        ModifiedKneserNey(2, 5).prob([1], 2)
    model = ModifiedKneserNey(3, 5).fit([0, 1, 2, 3, 4] * 4)
    with pytest.raises(ValueError, match="reads at most 2 tokens of history, got history=3"):
        model.losses([1, 2, 3, 4], history=3)
    with pytest.raises(ValueError, match="shorter than one window of 8"):
        model.window_losses(torch.tensor([1, 2, 3]), 8)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.prob([1], 7)
