"""Properties that must hold whatever the weights: causality, padding invariance, permutation equivariance, the
relative-position property of the sinusoidal table and of RoPE, cache = recomputation, NaN-free masking."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import max_diff

import tfm


def small_model(**overrides) -> tfm.EncoderDecoder:
    config = dict(src_vocab=13, tgt_vocab=13, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
                  d_ff=64, dropout=0.0, max_len=64)
    config.update(overrides)
    return tfm.EncoderDecoder(tfm.TransformerConfig(**config)).eval()


def test_causal_attention_never_uses_future_tokens():
    x = torch.randn(1, 8, 16)
    layer = tfm.EncoderLayer(16, 4, 32, dropout=0.0).eval()
    changed = x.clone()
    changed[0, 5:] += torch.randn(3, 16)
    out, _ = layer(x, tfm.causal_mask(8))
    out2, _ = layer(changed, tfm.causal_mask(8))
    assert max_diff(out[0, :5], out2[0, :5]) == 0.0
    assert max_diff(out[0, 5:], out2[0, 5:]) > 1e-3


def test_causal_encoder_classifier_masks_the_future_and_tells_positions_apart_without_position_vectors():
    kwargs = dict(n_vocab=11, n_classes=2, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=8,
                  pooling="mean")
    torch.manual_seed(0)
    causal = tfm.EncoderClassifier(**kwargs, causal=True).eval()
    ids = torch.randint(1, 11, (2, 6))  # (B, T), no padding
    with torch.no_grad():
        _, weights = causal(ids, need_weights=True)
    for w in weights:  # (B, h, T, T): nothing above the diagonal, rows still distributions
        assert w.triu(diagonal=1).abs().max().item() == 0.0
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]))
    plain = tfm.EncoderClassifier(**kwargs).eval()
    plain.load_state_dict(causal.state_dict())
    for model in (plain, causal):
        model.positions = torch.nn.Identity()  # no position vectors at all
    same_bag = torch.tensor([[1, 2, 3, 4], [4, 2, 3, 1]])  # one bag of tokens in two orders
    with torch.no_grad():
        assert max_diff(plain(same_bag)[0], plain(same_bag)[1]) <= 1e-5  # without a mask: a bag
        assert max_diff(causal(same_bag)[0], causal(same_bag)[1]) > 1e-3  # the causal mask breaks the symmetry


def test_decoder_predictions_do_not_depend_on_later_target_tokens():
    model = small_model()
    src, tgt = torch.randint(4, 13, (2, 6)), torch.randint(4, 13, (2, 7))
    changed = tgt.clone()
    changed[:, 4:] = torch.randint(4, 13, (2, 3))
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    assert max_diff(a[:, :4], b[:, :4]) == 0.0


def test_padding_does_not_change_real_positions():
    model = small_model()
    src, tgt = torch.randint(4, 13, (1, 5)), torch.randint(4, 13, (1, 4))
    padded_src = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    padded_tgt = torch.cat([tgt, torch.zeros(1, 2, dtype=torch.long)], dim=1)
    with torch.no_grad():
        plain, padded = model(src, tgt), model(padded_src, padded_tgt)
    assert max_diff(plain, padded[:, :4]) <= 1e-5


def test_self_attention_without_positions_is_permutation_equivariant():
    x, perm = torch.randn(2, 7, 16), torch.randperm(7)
    layer = tfm.EncoderLayer(16, 4, 32, dropout=0.0).eval()
    out, _ = layer(x)
    out_perm, _ = layer(x[:, perm])
    assert max_diff(out[:, perm], out_perm) <= 1e-5


def rotation_blocks(k: int, d_model: int) -> torch.Tensor:
    """The matrix M_k with PE(pos + k) = PE(pos) M_k: a 2x2 rotation by k·ω_i for each pair (2i, 2i+1)."""
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = k * math.exp(-math.log(10000.0) * 2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    return m


@pytest.mark.parametrize("k", [1, 5, 17])
def test_sinusoidal_pe_shift_is_a_fixed_linear_map(k):
    table = tfm.sinusoidal_table(100, 16).double()
    m = rotation_blocks(k, 16)
    for pos in (0, 3, 40, 80):
        assert max_diff(table[pos] @ m, table[pos + k]) <= 1e-5


def test_rope_scores_depend_only_on_the_offset():
    rope = tfm.RotaryEmbedding(8, max_len=64)
    q, k = torch.randn(1, 8), torch.randn(1, 8)

    def score(i, j):
        return (rope(q, start=i) @ rope(k, start=j).T).item()

    assert score(3, 1) == pytest.approx(score(20, 18), abs=1e-5)
    assert score(10, 10) == pytest.approx(score(0, 0), abs=1e-5)
    assert abs(score(5, 1) - score(5, 4)) > 1e-4


def test_cached_decoding_equals_recomputation():
    model = small_model()
    src = torch.randint(4, 13, (3, 6))
    src[1, 4:] = 0
    assert torch.equal(tfm.greedy_decode(model, src, 10, 1, 2, use_cache=True),
                       tfm.greedy_decode(model, src, 10, 1, 2, use_cache=False))
    cached = tfm.beam_search(model, src, 10, 1, 2, beam_size=3, use_cache=True)
    uncached = tfm.beam_search(model, src, 10, 1, 2, beam_size=3, use_cache=False)
    assert all(torch.equal(a, b) for a, b in zip(cached, uncached, strict=True))


def test_cached_logits_equal_full_logits_step_by_step():
    model = small_model()
    src, tgt = torch.randint(4, 13, (2, 6)), torch.randint(4, 13, (2, 5))
    with torch.no_grad():
        memory, _ = model.encode(src)
        full, _ = model.decode(tgt, memory, model.src_key_mask(src))
        caches = [{} for _ in model.decoder.layers]
        steps = [model.decode(tgt[:, t : t + 1], memory, model.src_key_mask(src), caches=caches, start=t)[0]
                 for t in range(5)]
    assert max_diff(torch.cat(steps, dim=1), full) <= 1e-5


def test_causal_lm_generation_with_cache_equals_without():
    lm = tfm.CausalLM(17, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=40, dropout=0.0).eval()
    prompt = torch.randint(0, 17, (2, 4))
    assert torch.equal(tfm.generate(lm, prompt, 12, temperature=0), tfm.generate(lm, prompt, 12, temperature=0,
                                                                                  use_cache=False))
    a = tfm.generate(lm, prompt, 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(0))
    b = tfm.generate(lm, prompt, 12, temperature=1.0, top_k=5, use_cache=False,
                     generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)


@pytest.mark.parametrize(("T", "S", "window"), [(6, 6, 1), (6, 6, 3), (6, 6, 6), (6, 6, 9), (2, 7, 3), (1, 5, 2)])
def test_sliding_window_mask_is_causal_and_sees_exactly_window_positions(T, S, window):
    mask = tfm.causal_mask(T, S, window=window)  # (T, S)
    for i in range(T):
        at = i + S - T  # the query's position in the sequence
        assert mask[i].tolist() == [0 <= at - j < window for j in range(S)]


def test_windowed_lm_is_blind_beyond_its_reach_and_its_cache_equals_recomputation():
    window, n_layers = 3, 2
    lm = tfm.CausalLM(17, d_model=32, n_heads=4, n_layers=n_layers, d_ff=64, max_len=40, dropout=0.0,
                      window=window).eval()
    full = tfm.CausalLM(17, d_model=32, n_heads=4, n_layers=n_layers, d_ff=64, max_len=40, dropout=0.0).eval()
    full.load_state_dict(lm.state_dict())
    ids = torch.randint(0, 17, (2, 12))
    changed = ids.clone()
    changed[:, 0] = (ids[:, 0] + 1) % 17  # change the first token only
    reach = n_layers * (window - 1) + 1  # tokens the last position can see through the stack
    with torch.no_grad():
        before, after = lm(ids), lm(changed)  # (B, T, n_vocab)
        assert torch.equal(before[:, reach:], after[:, reach:])  # out of reach: bit for bit unchanged
        assert not torch.allclose(before[:, reach - 1], after[:, reach - 1])  # just within reach: it matters
        assert not torch.allclose(full(ids)[:, reach:], full(changed)[:, reach:])  # no window: it matters
        wide = tfm.CausalLM(17, d_model=32, n_heads=4, n_layers=n_layers, d_ff=64, max_len=40, dropout=0.0,
                            window=12).eval()
        wide.load_state_dict(lm.state_dict())
        assert torch.equal(wide(ids), full(ids))  # a window as long as the line is the plain causal mask
    prompt = ids[:, :4]
    assert torch.equal(tfm.generate(lm, prompt, 10, temperature=0), tfm.generate(lm, prompt, 10, temperature=0,
                                                                                 use_cache=False))


def test_beam_search_with_one_beam_is_greedy():
    model = small_model()
    src = torch.randint(4, 13, (4, 7))
    greedy = tfm.greedy_decode(model, src, 12, 1, 2)
    beams = tfm.beam_search(model, src, 12, 1, 2, beam_size=1, alpha=0.0)
    for row, beam in zip(greedy, beams, strict=True):
        assert row[: len(beam)].tolist() == beam.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fn", [tfm.attention, tfm.fast_attention], ids=["explicit", "fast"])
def test_fully_masked_rows_give_zeros_not_nan(dtype, fn):
    q = torch.randn(2, 3, 4, 8, dtype=dtype, requires_grad=True)
    k = torch.randn(2, 3, 5, 8, dtype=dtype, requires_grad=True)
    v = torch.randn(2, 3, 5, 8, dtype=dtype, requires_grad=True)
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[0, :, 1] = False  # query 1 of example 0 may attend to nothing
    z, weights = fn(q, k, v, mask=mask)
    assert not torch.isnan(z).any() and (z[0, :, 1] == 0).all()
    if weights is not None:
        assert (weights[0, :, 1] == 0).all()
    z.float().sum().backward()
    assert all(not torch.isnan(t.grad).any() for t in (q, k, v))


def test_both_attentions_zero_empty_rows_even_with_nan_values():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 1, 4, 8) for _ in range(3))  # (B, h, T, d_k), S = T = 4
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)  # (B, 1, T, S)
    mask[0, :, 1] = False  # query 1 of example 0 may attend to nothing
    mask[1, :, :, 3] = False  # key 3 of example 1 is masked for every query
    mask[1, :, 2] = False  # and query 2 of example 1 has no key
    empty = ~mask.any(-1)  # (B, 1, T)
    z, _ = tfm.attention(q, k, v, mask=mask)
    z_fast, _ = tfm.fast_attention(q, k, v, mask=mask)
    assert max_diff(z, z_fast) < 1e-5  # finite values: the two agree everywhere
    v_nan = v.clone()
    v_nan[1, :, 3] = float("nan")  # a NaN value at a key that every query of example 1 must ignore
    for fn in (tfm.attention, tfm.fast_attention):
        z_nan, _ = fn(q, k, v_nan, mask=mask)
        assert (z_nan[empty] == 0).all(), fn.__name__  # exact zeros, not 0 x NaN
        assert max_diff(z_nan[0], z[0]) < 1e-5, fn.__name__  # example 0 has no NaN: unchanged


def test_weight_tying_shares_one_parameter():
    model = small_model(share_embeddings=True, tie_output=True)
    assert model.generator.weight is model.tgt_embed.weight is model.src_embed.weight
    untied = small_model(tie_output=False)
    assert untied.generator.weight is not untied.tgt_embed.weight
    assert tfm.count_parameters(untied) > tfm.count_parameters(model)


def test_token_embedding_is_scaled_by_sqrt_d_model():
    embed = tfm.TokenEmbedding(10, 16)
    ids = torch.tensor([[1, 2, 3]])
    assert max_diff(embed(ids), embed.embedding(ids) * 4.0) == 0.0
    assert max_diff(tfm.TokenEmbedding(10, 16, scale=False)(ids), tfm.TokenEmbedding(10, 16, scale=False)
                    .embedding(ids)) >= 0.0


def test_dropout_only_in_training_mode():
    layer = tfm.EncoderLayer(16, 4, 32, dropout=0.5)
    x = torch.randn(2, 5, 16)
    layer.eval()
    assert torch.equal(layer(x)[0], layer(x)[0])
    layer.train()
    assert not torch.equal(layer(x)[0], layer(x)[0])


def test_padding_mask_and_causal_mask_contents():
    assert tfm.padding_mask([3, 1]).tolist() == [[True, True, True], [True, False, False]]
    assert tfm.causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    combined = tfm.combine_masks(tfm.padding_mask([3, 2]), tfm.causal_mask(3))
    assert combined.shape == (2, 1, 3, 3) and combined[1, 0, 2].tolist() == [True, True, False]


def test_padding_in_a_batch_does_not_change_the_encoder_at_real_positions():
    model = small_model()
    long, short = torch.randint(4, 13, (1, 7)), torch.randint(4, 13, (1, 4))
    batch = torch.cat([long, torch.cat([short, torch.zeros(1, 3, dtype=torch.long)], dim=1)])  # (2, 7), pad id 0
    with torch.no_grad():
        memory, _ = model.encode(batch)  # (2, 7, d_model)
        alone, _ = model.encode(short)  # (1, 4, d_model)
    assert max_diff(memory[1, :4], alone[0]) <= 1e-5
