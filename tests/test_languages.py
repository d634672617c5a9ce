"""tfm.languages: the mirror language's lines are what its docstring says, its checker accepts exactly them, and its
exact entropies agree with the generator (a Monte Carlo estimate of the conditional entropy from sampled lines)."""

import math
from collections import Counter, defaultdict

import pytest
import torch

from tfm.languages import MirrorLanguage


def test_lines_have_the_documented_shape():
    language = MirrorLanguage(half_length=4, n_letters=3)
    lines = language.sample(50, seed=0)
    assert lines.shape == (50, language.length) == (50, 10)
    assert (lines[:, 0] == language.vocab.bos_id).all()
    for row in lines.tolist():
        text = language.show(row)
        assert text[4] == "|" and text[5:] == text[:4][::-1] and set(text[:4]) <= set("abc")


def test_sampling_is_seeded():
    language = MirrorLanguage()
    assert torch.equal(language.sample(20, seed=3), language.sample(20, seed=3))
    assert not torch.equal(language.sample(20, seed=3), language.sample(20, seed=4))


def test_every_sampled_line_is_valid_and_edits_are_not():
    language = MirrorLanguage(half_length=5, n_letters=4)
    for row in language.sample(200, seed=1).tolist():
        tokens = language.vocab.decode(row)
        assert language.is_valid(tokens)
        broken = list(tokens)
        broken[-1] = "a" if broken[-1] != "a" else "b"  # the last mirrored letter no longer matches the first
        assert not language.is_valid(broken)
    assert not language.is_valid(list("abcd|dcba"))  # too short
    assert not language.is_valid(list("abcde-edcba"))  # no bar
    assert not language.is_valid(list("abcdz|zdcba"))  # a letter outside the alphabet


def test_distances_point_at_the_copied_letter():
    language = MirrorLanguage(half_length=6, n_letters=5)
    distance = language.distances()
    line = language.sample(1, seed=2)[0]  # (2L + 2,)
    targets = line[1:]  # the predicted tokens
    for t, d in enumerate(distance.tolist()):
        if d:
            assert targets[t] == targets[t - d]
    assert distance.tolist() == [0] * 7 + [2, 4, 6, 8, 10, 12]


def test_exact_entropies_match_the_generator():
    """Estimate H(next token | everything before it) from sampled lines and compare with the exact values."""
    language = MirrorLanguage(half_length=3, n_letters=3)
    lines = language.sample(20_000, seed=0).tolist()
    exact = language.entropies()
    for t in range(2 * language.half_length + 1):
        by_prefix = defaultdict(Counter)
        for row in lines:
            by_prefix[tuple(row[: t + 1])][row[t + 1]] += 1
        estimate = 0.0
        for counts in by_prefix.values():
            n = sum(counts.values())
            estimate += n / len(lines) * -sum(c / n * math.log(c / n) for c in counts.values())
        assert abs(estimate - exact[t].item()) < 0.02, (t, estimate, exact[t].item())
    assert language.optimal_loss() == pytest.approx(3 * math.log(3) / 7)


def test_short_context_loses_the_far_letters():
    language = MirrorLanguage(half_length=10, n_letters=8)
    free = math.log(8)
    assert language.optimal_loss(0) == pytest.approx(20 * free / 21)  # only the bar's place is known
    assert language.optimal_loss(9) == pytest.approx(16 * free / 21)  # mirrored letters 2, 4, 6, 8 back
    assert language.optimal_loss(20) == pytest.approx(language.optimal_loss())
    losses = [language.optimal_loss(c) for c in range(22)]
    assert all(a >= b for a, b in zip(losses, losses[1:], strict=False))


@pytest.mark.parametrize("kwargs", [{"half_length": 0}, {"n_letters": 1}, {"n_letters": 27}])
def test_bad_sizes_are_rejected(kwargs):
    with pytest.raises(ValueError):
        MirrorLanguage(**kwargs)


def test_bad_arguments_are_rejected():
    language = MirrorLanguage()
    with pytest.raises(ValueError, match="n_lines"):
        language.sample(0)
    with pytest.raises(ValueError, match="context"):
        language.entropies(-1)
