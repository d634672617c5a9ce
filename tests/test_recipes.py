"""tfm.recipes: the shared date-translator run returns a usable model and is seeded."""

import pytest

from tfm.recipes import train_date_translator, translate


def test_a_short_run_returns_a_model_vocabularies_and_history():
    model, src_vocab, tgt_vocab, history = train_date_translator(steps=5, n_pairs=300)
    assert not model.training and len(history["loss"]) == 5
    assert "march" in src_vocab.stoi and "-" in tgt_vocab.stoi
    assert isinstance(translate(model, src_vocab, tgt_vocab, ["3", "march", "1", "9", "9", "8"]), str)
    _, _, _, again = train_date_translator(steps=5, n_pairs=300)
    assert again["loss"] == history["loss"]
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        train_date_translator(steps=0)
