"""tfm.incontext: losses by position, prefix-matching scores and head ablation, on models whose answers are known:
a hand-built attention pattern, and ablation equal to removing the head's slice of W_O."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tfm
from tfm.incontext import (
    ablate_heads,
    attention_layers,
    in_context_score,
    loss_by_position,
    prefix_matching_scores,
    previous_token_scores,
    repeated_random_tokens,
    repeating_random_tokens,
    train_to_copy,
)
from tfm.modern import ModernConfig, ModernLM


def small_models():
    torch.manual_seed(0)
    return [tfm.CausalLM(30, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_len=64).eval(),
            ModernLM(ModernConfig(n_vocab=30, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_len=64)).eval()]


@pytest.mark.parametrize("model", small_models(), ids=["CausalLM", "ModernLM"])
def test_loss_by_position_is_the_per_token_cross_entropy(model):
    ids = torch.randint(0, 30, (3, 12))
    with torch.no_grad():
        logits = model(ids[:, :-1])  # (B, T - 1, n_vocab)
    expected = torch.stack([F.cross_entropy(logits[:, t], ids[:, t + 1]) for t in range(11)])
    assert torch.allclose(loss_by_position(model, ids), expected, atol=1e-6)
    losses = torch.tensor([3.0, 2.5, 2.0, 1.0])
    assert in_context_score(losses, early=1, late=3) == pytest.approx(-1.5)
    assert in_context_score(losses, early=(0, 2), late=(2, 4)) == pytest.approx(1.5 - 2.75)  # means of ranges
    with pytest.raises(ValueError, match="early"):
        in_context_score(losses, early=3, late=1)
    with pytest.raises(ValueError, match="early"):
        in_context_score(losses, early=(0, 3), late=(2, 4))  # overlapping ranges


def test_repeated_random_tokens_repeat_and_prefix_matching_reads_the_right_entry():
    ids = repeated_random_tokens(50, length=8, batch=4, generator=torch.Generator().manual_seed(0), low=5)
    assert ids.shape == (4, 16) and torch.equal(ids[:, :8], ids[:, 8:]) and ids.min() >= 5
    # a perfect induction head (layer 1, head 2): from t in the second copy to t - L + 1; every other head uniform
    L, T = 8, 16
    perfect = torch.zeros(T, T)
    perfect[torch.arange(L, T), torch.arange(L, T) - L + 1] = 1.0
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]  # (T, T): causal, uniform
    layer0 = uniform.expand(2, 3, T, T)
    layer1 = torch.stack([uniform, uniform, perfect], dim=0).expand(2, 3, T, T)
    scores = prefix_matching_scores([layer0, layer1], L)
    assert scores.shape == (2, 3) and scores[1, 2] == 1.0
    assert torch.allclose(scores[0], (1 / torch.arange(L + 1, T + 1)).mean().expand(3))  # uniform: 1 / (t + 1)
    with pytest.raises(ValueError, match="expected attention weights"):
        prefix_matching_scores([layer0[..., :10, :10]], L)


@pytest.mark.parametrize("model", small_models(), ids=["CausalLM", "ModernLM"])
def test_ablating_a_head_equals_removing_its_columns_of_the_output_projection(model):
    ids = torch.randint(0, 30, (2, 10))
    layer, head = 1, 2
    attn = attention_layers(model)[layer]
    projection = attn.out_proj if hasattr(attn, "out_proj") else attn.o_proj
    with torch.no_grad():
        before = model(ids)
        with ablate_heads(model, [(layer, head)]):
            ablated = model(ids)
        after = model(ids)
        saved = projection.weight.clone()
        projection.weight[:, head * attn.d_k : (head + 1) * attn.d_k] = 0.0  # the head's block of W_O
        removed = model(ids)
        projection.weight.copy_(saved)
    assert torch.allclose(ablated, removed, atol=1e-6)
    assert (ablated - before).abs().max() > 1e-4  # the head mattered
    assert torch.equal(after, before)  # the hook is gone after the block
    with pytest.raises(ValueError, match="no head 9 in layer 0"):
        with ablate_heads(model, [(0, 9)]):
            pass


def test_distinct_copies_repeat_no_token_and_bad_sizes_are_named():
    ids = repeated_random_tokens(40, length=30, batch=50, generator=torch.Generator().manual_seed(1), low=4,
                                 distinct=True)
    assert ids.shape == (50, 60) and torch.equal(ids[:, :30], ids[:, 30:]) and ids.min() >= 4 and ids.max() < 40
    assert all(len(set(row[:30].tolist())) == 30 for row in ids)
    with pytest.raises(ValueError, match="if distinct, length <= n_vocab - low"):
        repeated_random_tokens(40, length=37, batch=1, low=4, distinct=True)


def test_repeating_tokens_copy_at_a_period_that_varies_between_rows():
    ids = repeating_random_tokens(64, length=64, batch=300, periods=(8, 32), generator=torch.Generator().manual_seed(0))
    assert ids.shape == (300, 64)
    periods = []
    for row in ids:
        period = next(p for p in range(1, 64) if torch.equal(row[p:], row[:-p]))  # the smallest shift that repeats
        periods.append(period)
    assert min(periods) >= 2 and max(periods) <= 32 and len(set(periods)) >= 20  # (2..7: a span that repeats itself)
    assert sum(p >= 8 for p in periods) >= 290
    with pytest.raises(ValueError, match="periods"):
        repeating_random_tokens(64, length=32, batch=1, periods=(8, 32))


def test_previous_token_scores_read_the_subdiagonal():
    T = 6
    previous = torch.zeros(T, T)
    previous[0, 0] = 1.0
    previous[torch.arange(1, T), torch.arange(T - 1)] = 1.0  # (T, T): every t >= 1 on t - 1
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]  # (T, T)
    scores = previous_token_scores([torch.stack([uniform, previous]).expand(3, 2, T, T)])
    assert scores.shape == (1, 2) and scores[0, 1] == 1.0
    assert torch.allclose(scores[0, 0], (1 / torch.arange(2, T + 1)).mean())
    with pytest.raises(ValueError, match="square attention weights"):
        previous_token_scores([uniform[None, None, :, :4]])


def test_training_to_copy_lowers_the_loss_and_records_the_repeat_test():
    torch.manual_seed(0)
    model = ModernLM(ModernConfig(n_vocab=16, d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, max_len=16))
    history = train_to_copy(model, 16, steps=60, length=16, batch=16, periods=(3, 6), eval_every=20,
                            generator=torch.Generator().manual_seed(0))
    assert history["step"] == list(range(1, 61)) and history["eval_step"] == [20, 40, 60]
    assert sum(history["loss"][-10:]) / 10 < sum(history["loss"][:10]) / 10 - 0.3
    assert all(0.0 <= p <= 1.0 for p in history["prefix"]) and len(history["second"]) == 3
    with pytest.raises(ValueError, match="even length"):
        train_to_copy(model, 16, steps=1, length=15)
