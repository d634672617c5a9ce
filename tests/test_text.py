"""tfm.text: the grammar generates only sentences its checker accepts, the checker rejects agreement errors, and the
training windows are shifted by one token."""

import random

import pytest
import torch

from tfm.text import grammar_sentence, grammar_text, is_grammatical, random_windows


def test_every_generated_sentence_is_grammatical():
    rng = random.Random(0)
    assert all(is_grammatical(grammar_sentence(rng)) for _ in range(2000))


@pytest.mark.parametrize("sentence", [
    "the cats sees a dog .",  # plural subject, singular verb
    "a cats see the dog .",  # singular determiner, plural noun
    "the cat sees a dog",  # no full stop
    "the cat sees .",  # no object
    "the red clever cat sees a dog .",  # two adjectives
    "the cat sees a dog . the",  # trailing words
])
def test_ungrammatical_sentences_are_rejected(sentence):
    assert not is_grammatical(sentence)


def test_grammar_text_is_seeded():
    assert grammar_text(50, seed=3) == grammar_text(50, seed=3) != grammar_text(50, seed=4)


def test_random_windows_are_next_token_pairs():
    ids = torch.arange(100)
    inputs, targets = random_windows(ids, 10, 4, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (4, 10)
    assert torch.equal(targets, inputs + 1)
    with pytest.raises(ValueError, match="longer than length=100"):
        random_windows(ids, 100, 2)
