"""Held-out splits of the date task (chapter 7): by source, or by date in every written style."""

from __future__ import annotations

import pytest

from tfm.data import date_pairs, split_pairs


def test_split_by_target_keeps_every_held_out_date_out_of_training():
    pairs = date_pairs(3000, seed=0, first_year=2000, last_year=2003)  # few dates, many in several styles
    by_source, test = split_pairs(pairs, 300)
    by_target, same_test = split_pairs(pairs, 300, by="target")
    assert same_test == test
    held_out = {tuple(t) for _, t in test}
    assert any(tuple(t) in held_out for _, t in by_source)  # the default split lets them in, in other styles
    assert not any(tuple(t) in held_out for _, t in by_target)
    assert {tuple(s) for s, _ in by_target} <= {tuple(s) for s, _ in by_source}


def test_split_by_source_is_unchanged_by_default():
    pairs = date_pairs(500, seed=0) + date_pairs(50, seed=0)
    assert split_pairs(pairs, 50) == split_pairs(pairs, 50, by="source")


@pytest.mark.parametrize("kwargs", [{"n_test": 0}, {"n_test": 100}, {"n_test": 5, "by": "date"}])
def test_split_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="n_test|by must be"):
        split_pairs(date_pairs(100, seed=0), **kwargs)
