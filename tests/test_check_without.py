"""tfm.check.without: an exercise's one-call answer (calling the tfm function, or the chapter's reference object,
that computes what the learner is asked to write) fails its check with a message that says why, through every
route a learner would reach it; an answer written by hand passes; everything is restored afterwards."""

from __future__ import annotations

import sys

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


def _with_torch_functions_off(fn, *args):
    with torch._C.DisableTorchFunction():  # hides the call from a TorchFunctionMode, not from the kernels below
        return fn(*args)


@pytest.mark.parametrize("spelling", [
    lambda x: torch.softmax(x, 0),
    lambda x: torch.nn.functional.softmax(x, 0),
    lambda x: x.softmax(0),
    lambda x: torch.nn.Softmax(dim=0)(x),
    lambda x: torch.special.softmax(x, 0),
    lambda x: torch.log_softmax(x, 0).exp(),
    lambda x: torch.nn.functional.softmin(-x, 0),
    lambda x: torch.ops.aten._softmax(x, 0, False),
    lambda x: torch.exp(-torch.nn.functional.cross_entropy(x.expand(3, 3), torch.arange(3), reduction="none")),
    lambda x: _with_torch_functions_off(torch.softmax, x, 0),
], ids=["torch", "F", "method", "module", "special", "log", "softmin", "aten", "cross-entropy", "functions-off"])
def test_a_pytorch_operation_is_refused_however_it_is_spelled(spelling):
    x = torch.tensor([1.0, 2.0, 3.0])
    with pytest.raises(CheckFailed, match="calls PyTorch's .*softmax, which computes the answer"):
        with without(spelling, "softmax", "log_softmax", "special_softmax"):
            spelling(x)
    torch.testing.assert_close(spelling(x), torch.softmax(x, 0))  # allowed again afterwards

    def by_hand(x):  # the exponentials and their sum: not refused
        e = (x - x.max()).exp()
        return e / e.sum()

    with without(by_hand, "softmax", "log_softmax", "special_softmax"):
        got = by_hand(x)
    torch.testing.assert_close(got, torch.softmax(x, 0))


def test_autograd_is_refused_as_an_operation():
    x = torch.tensor([0.3, -1.2])
    for jacobian in (lambda s: torch.autograd.functional.jacobian(lambda t: t.softmax(0), s),
                     lambda s: torch.func.jacrev(lambda t: t.softmax(0))(s)):
        with pytest.raises(CheckFailed, match="calls PyTorch's grad"), without(jacobian, "grad", "backward"):
            jacobian(x)


def test_a_method_is_refused_on_instances_made_before_and_restored():
    from tfm.bpe import BPETokenizer, train_bpe

    tokenizer = train_bpe({"lower": 5, "lowest": 3, "newer": 2}, 5)
    split = tokenizer.split_word("lowest")

    def answer(word):
        return tokenizer.split_word(word)

    with pytest.raises(CheckFailed, match="calls tfm.bpe.BPETokenizer.split_word"):
        with without(answer, BPETokenizer.split_word):
            answer("lowest")
    assert tokenizer.split_word("lowest") == split and "split_word" in vars(BPETokenizer)


def test_a_class_is_refused_through_the_module_that_defines_it():
    from tokenizers import Tokenizer, models

    vocab = {"[UNK]": 0, "un": 1, "##able": 2}

    def answer(word):  # reached as models.WordPiece: a module the learner imported, not a name of theirs
        return Tokenizer(models.WordPiece(vocab, unk_token="[UNK]")).encode(word).tokens

    with pytest.raises(CheckFailed, match="calls tokenizers.models.WordPiece"):
        with without(answer, models.WordPiece):
            answer("unable")
    assert answer("unable") == ["un", "##able"]


def test_the_answer_is_refused_through_references_kept_before_the_check():
    import importlib

    import tfm.masks

    kept = [tfm.padding_mask]
    wrapped = (lambda f: lambda lengths: f(lengths))(tfm.padding_mask)
    for answer in (lambda lengths: kept[0](lengths), wrapped,
                   lambda lengths: importlib.reload(tfm.masks).padding_mask(lengths)):
        with pytest.raises(CheckFailed, match="calls tfm.masks.padding_mask"):
            with without(answer, tfm.padding_mask):
                answer([2, 3])
    assert sys.getprofile() is None and tfm.padding_mask([1]).tolist() == [[True]]
