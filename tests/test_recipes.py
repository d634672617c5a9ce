"""tfm.recipes: chapter 7's date-translator run returns a usable model, is seeded, and follows its schedule."""

import pytest
import torch

from tfm.data import Vocab, date_pairs, split_pairs
from tfm.recipes import faded_noam_rate, train_date_translator, translate
from tfm.training import noam_rate


def data():
    pairs = date_pairs(300, seed=0)
    train_pairs, test_pairs = split_pairs(pairs, 50, by="target")
    return train_pairs, test_pairs, Vocab.from_sequences(s for s, _ in pairs), Vocab.from_sequences(t for _, t in pairs)


def test_a_short_run_returns_a_model_and_a_history_with_held_out_losses():
    train_pairs, test_pairs, src_vocab, tgt_vocab = data()
    model, history = train_date_translator(train_pairs, src_vocab, tgt_vocab, steps=6, warmup=3,
                                           held_out=test_pairs, eval_every=3)
    assert not model.training and len(history["loss"]) == 6
    assert history["eval_step"] == [0, 3, 6] and all(loss > 0 for loss in history["eval_loss"])
    assert isinstance(translate(model, src_vocab, tgt_vocab, ["3", "march", "1", "9", "9", "8"]), str)
    again, repeat = train_date_translator(train_pairs, src_vocab, tgt_vocab, steps=6, warmup=3)
    assert repeat["loss"] == history["loss"]  # seeded, and held-out evaluation changes nothing
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))
    other, _ = train_date_translator(train_pairs, src_vocab, tgt_vocab, steps=6, warmup=3, seed=1)
    assert not torch.equal(other.generator.weight, model.generator.weight)
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        train_date_translator(train_pairs, src_vocab, tgt_vocab, steps=0)


def test_the_rate_warms_up_then_fades_to_zero_at_the_last_step():
    steps, warmup = 300, 200
    rates = [faded_noam_rate(step, steps, warmup) for step in range(steps)]
    assert rates[:warmup] == [noam_rate(step + 1, 64, warmup) for step in range(warmup)]  # §5.3's warm-up
    assert max(range(steps), key=rates.__getitem__) == warmup - 1  # the peak ends the warm-up
    assert all(a > b for a, b in zip(rates[warmup:-1], rates[warmup + 1:], strict=True))  # then it only falls
    assert rates[-1] == pytest.approx(noam_rate(steps, 64, warmup) / (steps - warmup))  # one step from zero
    flat = [faded_noam_rate(step, steps, warmup, ramp=False) for step in range(warmup)]
    assert flat == [noam_rate(warmup, 64, warmup)] * warmup  # no warm-up: the peak from the first step
    with pytest.raises(ValueError, match="need 1 <= warmup < steps, got warmup=300, steps=300"):
        faded_noam_rate(0, 300, 300)
