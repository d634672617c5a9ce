"""tfm.check.without: an exercise's one-call answer (calling the tfm function, or the chapter's reference object,
that computes what the learner is asked to write) fails its check with a message that says why, through every
route a learner would reach it; an answer written by hand passes; everything is restored afterwards."""

from __future__ import annotations

import pytest
import torch

import tfm
import tfm.incontext
from tfm.check import CheckFailed, learner_code, without
from tfm.incontext import prefix_matching_scores

WEIGHTS = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
ALIAS = tfm.incontext.prefix_matching_scores
ROPE = tfm.RotaryEmbedding(8)  # made before the check, as a learner's cell would


def by_import(w, n):  # from tfm.incontext import prefix_matching_scores
    return prefix_matching_scores([w], n)[0]


def by_module(w, n):  # tfm.incontext.prefix_matching_scores
    return tfm.incontext.prefix_matching_scores([w], n)[0]


def by_alias(w, n):  # a name of the notebook bound to it
    return ALIAS([w], n)[0]


def by_default(w, n, score=tfm.incontext.prefix_matching_scores):  # a default argument
    return score([w], n)[0]


def by_hand(w, n):
    queries = torch.arange(n, 2 * n)
    return w[:, :, queries, queries - n + 1].mean(dim=(0, 2))


@pytest.mark.parametrize("answer", [by_import, by_module, by_alias, by_default])
def test_a_one_call_answer_fails_and_says_why(answer):
    assert torch.allclose(answer(WEIGHTS, 4), prefix_matching_scores([WEIGHTS], 4)[0])  # it is the right answer
    with pytest.raises(CheckFailed, match=rf"{answer.__name__} calls tfm.incontext.prefix_matching_scores, which "
                                          "computes the answer: this exercise asks you to write it yourself"):
        with without(answer, tfm.incontext.prefix_matching_scores):
            answer(WEIGHTS, 4)


def test_an_answer_by_hand_passes_and_everything_is_restored():
    with without(by_hand, tfm.incontext.prefix_matching_scores, tfm.RotaryEmbedding):
        got = by_hand(WEIGHTS, 4)
    assert torch.allclose(got, prefix_matching_scores([WEIGHTS], 4)[0])
    assert tfm.incontext.prefix_matching_scores is ALIAS and prefix_matching_scores is ALIAS
    assert by_default.__defaults__ == (ALIAS,)
    assert torch.equal(ROPE(torch.ones(3, 8)), tfm.RotaryEmbedding(8)(torch.ones(3, 8)))  # forward is back


def test_a_class_is_unavailable_and_so_are_its_instances():
    def new_instance(x):
        return tfm.RotaryEmbedding(8)(x)

    def old_instance(x):
        return ROPE(x)

    for answer in (new_instance, old_instance):
        with pytest.raises(CheckFailed, match="tfm.positional.RotaryEmbedding, which computes the answer"):
            with without(answer, tfm.RotaryEmbedding):
                answer(torch.ones(3, 8))


def test_restored_after_a_failure_and_through_learner_code():
    with pytest.raises(CheckFailed, match="my_answer calls"):
        with learner_code("my_answer", by_module, [tfm.incontext.prefix_matching_scores]):
            by_module(WEIGHTS, 4)
    assert tfm.incontext.prefix_matching_scores is ALIAS
    with pytest.raises(ValueError, match="needs the learner's fn"):
        with learner_code("my_answer", None, [ALIAS]):
            pass


def test_the_function_itself_or_a_partial_of_it_fails():
    import functools

    for answer in (tfm.incontext.prefix_matching_scores, functools.partial(tfm.incontext.prefix_matching_scores)):
        with pytest.raises(CheckFailed, match="is tfm.incontext.prefix_matching_scores itself"):
            with without(answer, tfm.incontext.prefix_matching_scores, name="prefix_matching"):
                answer([WEIGHTS], 4)
