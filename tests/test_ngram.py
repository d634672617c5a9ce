"""tfm.ngram: interpolated Kneser-Ney against probabilities computed by hand, a distribution that sums to 1 for every
history, and the baselines' edge cases."""

from __future__ import annotations

import math
import random

import pytest

from tfm.ngram import KneserNey, unigram_cross_entropy


def test_bigram_probabilities_computed_by_hand():
    # training text 0 1 0 1 2 over a vocabulary of 4 (token 3 never seen), discount 0.5
    model = KneserNey(order=2, n_vocab=4, discount=0.5).fit([[0, 1, 0, 1, 2]])
    # continuation counts: 1 follows {0}, 0 follows {1}, 2 follows {1}: N1+(. w) = 1, 1, 1, 0; 3 grams, 3 kinds
    unigram = {0: (0.5 + 0.5 * 3 / 4) / 3, 1: (0.5 + 0.5 * 3 / 4) / 3, 2: (0.5 + 0.5 * 3 / 4) / 3, 3: (0.5 * 3 / 4) / 3}
    assert [model.prob([], w) for w in range(4)] == pytest.approx([unigram[w] for w in range(4)])
    # after 0: 1 seen twice, one kind of follower; after 1: 0 and 2 once each
    assert model.prob([0], 1) == pytest.approx((1.5 + 0.5 * 1 * unigram[1]) / 2)  # 0.8229...
    assert model.prob([0], 3) == pytest.approx((0.5 * 1 * unigram[3]) / 2)  # 0.03125
    assert model.prob([1], 2) == pytest.approx((0.5 + 0.5 * 2 * unigram[2]) / 2)  # 0.3958...
    assert model.prob([3], 0) == pytest.approx(unigram[0])  # an unseen history falls back entirely
    assert model.prob([2, 0], 1) == model.prob([0], 1)  # only the last order - 1 tokens count


@pytest.mark.parametrize("order", [1, 2, 3])
def test_probabilities_sum_to_one_for_every_history(order):
    rng = random.Random(0)
    train = [[rng.randrange(6) for _ in range(rng.randrange(3, 30))] for _ in range(20)]
    model = KneserNey(order=order, n_vocab=8, discount=0.75).fit(train)
    histories = [[], [0], [5], [7], [1, 2], [7, 7], [3, 3, 3]]
    for history in histories:
        assert sum(model.prob(history, w) for w in range(8)) == pytest.approx(1.0)
        assert min(model.prob(history, w) for w in range(8)) > 0  # tokens 6 and 7 were never seen


def test_a_higher_order_helps_on_text_with_structure():
    # a language where the next token is the sum of the two before, mod 7: bigrams cannot know it, trigrams can
    rng = random.Random(1)
    def sequence():
        s = [rng.randrange(7), rng.randrange(7)]
        while len(s) < 40:
            s.append((s[-1] + s[-2]) % 7)
        return s
    train, test = [sequence() for _ in range(200)], [sequence() for _ in range(20)]
    losses = {n: KneserNey(n, 7).fit(train).cross_entropy(test, score_from=2) for n in (1, 2, 3)}
    assert losses[3] < 0.1 < losses[2] and losses[2] == pytest.approx(losses[1], abs=0.05)
    assert losses[1] == pytest.approx(math.log(7), abs=0.02)  # uniform tokens: the unigram loss is log 7
    assert unigram_cross_entropy(train, test, 7) == pytest.approx(math.log(7), abs=0.02)


def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="order must be >= 1"):
        KneserNey(0, 5)
    with pytest.raises(ValueError, match="discount"):
        KneserNey(2, 5, discount=1.0)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 5\)"):
        KneserNey(2, 5).fit([[1, 2, 9]])
    with pytest.raises(RuntimeError, match="fit the model"):
        KneserNey(2, 5).prob([1], 2)
    with pytest.raises(ValueError, match="no token to score"):
        KneserNey(3, 5).fit([[1, 2, 3]]).cross_entropy([[1, 2]])
