"""tfm's RoPE pairs adjacent features (2i, 2i+1), as the RoFormer paper writes it (chapter 5). Hugging Face's LLaMA
pairs feature i with i + d/2 ("rotate half"); the two are the same rotation up to a fixed reordering of the features."""

from __future__ import annotations

import math

import pytest
import torch

import tfm


def rope_matrix(m: int, d: int) -> torch.Tensor:
    """R_m for row vectors (x R_m): a 2x2 block [[cos, sin], [-sin, cos]] of angle m·θ_i on features (2i, 2i+1)."""
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    R = torch.zeros(d, d, dtype=torch.float64)
    for i, angle in enumerate((m * theta).tolist()):
        c, s = math.cos(angle), math.sin(angle)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return R


EVENS_THEN_ODDS = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])  # (16,)


def test_rope_is_the_block_diagonal_rotation_of_adjacent_pairs():
    rope = tfm.RotaryEmbedding(16, max_len=64)
    x = torch.randn(2, 3, 10, 16)  # (B, h, T, d_k)
    rotated = rope(x, start=5).double()  # (B, h, T, d_k)
    for t in range(10):
        expected = x[..., t, :].double() @ rope_matrix(5 + t, 16)  # (B, h, d_k)
        assert (rotated[..., t, :] - expected).abs().max() < 1e-5


def test_rope_score_is_q_times_r_of_the_difference_times_k():
    rope = tfm.RotaryEmbedding(16, max_len=64)
    q, k = torch.randn(16), torch.randn(16)
    scores = rope(q.expand(30, 16)) @ rope(k.expand(30, 16)).T  # (30, 30): [m, n] = (q R_m)(k R_n)^T
    for m, n in [(0, 0), (7, 3), (3, 7), (29, 0), (12, 12)]:
        assert scores[m, n].item() == pytest.approx((q.double() @ rope_matrix(m - n, 16) @ k.double()).item(), abs=1e-4)


def test_rope_equals_hugging_face_rotate_half_on_reordered_features():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    config = llama.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64)
    q, k = torch.randn(1, 4, 12, 16), torch.randn(1, 4, 12, 16)  # (B, h, T, d_k)
    positions = torch.arange(3, 15)[None]  # (1, T): positions 3..14
    cos, sin = llama.LlamaRotaryEmbedding(config)(q, positions)  # (1, T, d_k) each
    hf_q, hf_k = llama.apply_rotary_pos_emb(q[..., EVENS_THEN_ODDS], k[..., EVENS_THEN_ODDS], cos, sin)
    rope = tfm.RotaryEmbedding(16, max_len=64)
    assert (hf_q - rope(q, start=3)[..., EVENS_THEN_ODDS]).abs().max() < 1e-5
    assert (hf_k - rope(k, start=3)[..., EVENS_THEN_ODDS]).abs().max() < 1e-5
    # without the reordering the two layouts differ: the pairing is a real convention, not a detail
    hf_plain, _ = llama.apply_rotary_pos_emb(q, k, cos, sin)
    assert (hf_plain - rope(q, start=3)).abs().max() > 1e-2


def _rotary_lm(seed: int = 0) -> tfm.CausalLM:
    torch.manual_seed(seed)
    return tfm.CausalLM(20, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_len=24,
                        positional="rotary").double().eval()


def test_a_rotary_causal_lm_rotates_each_heads_queries_and_keys():
    """One layer of tfm.CausalLM(positional="rotary") against attention written out: rotate q and k by hand."""
    model = _rotary_lm()
    attn = model.decoder.layers[0].self_attn
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    q, k, v = attn.project(x)  # (B, h, T, d_k) each, not rotated
    rope = tfm.RotaryEmbedding(8, max_len=24).double()
    mask = tfm.causal_mask(7, 7)
    z, _ = tfm.attention(rope(q), rope(k), v, mask=mask)  # (B, h, T, d_k)
    expected = attn.out_proj(attn.merge_heads(z))
    got, _ = attn(x, mask=mask)
    assert torch.allclose(got, expected, atol=1e-12)


def test_a_rotary_causal_lm_sees_relative_positions_and_caches_exactly():
    model = _rotary_lm()
    ids = torch.randint(0, 20, (3, 12), generator=torch.Generator().manual_seed(0))
    full = model(ids)
    caches = model.new_caches()
    steps = [model(ids[:, :5], caches=caches)] + [model(ids[:, t:t + 1], caches=caches, start=t) for t in range(5, 12)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-10)  # cached decoding = recomputation
    # Through the cache, new tokens are rotated as the positions after the cached ones: the same six vectors after
    # nine cached positions give the scores they give alone (rotary scores depend on relative positions only).
    layer = model.decoder.layers[0].self_attn
    x = torch.randn(1, 6, 32, dtype=torch.float64)
    everything = torch.ones(6, 6, dtype=torch.bool)
    _, alone = layer(x, mask=everything, need_weights=True)  # (1, h, 6, 6)
    cache = {}
    layer(torch.randn(1, 9, 32, dtype=torch.float64), cache=cache)  # 9 positions come first
    _, after = layer(x, mask=torch.ones(6, 15, dtype=torch.bool), cache=cache, need_weights=True)  # (1, h, 6, 15)
    among_new = after[..., 9:] / after[..., 9:].sum(-1, keepdim=True)  # the softmax over the six new keys only
    assert torch.allclose(among_new, alone, atol=1e-6)
    learned = tfm.CausalLM(20, d_model=32, n_heads=4, n_layers=2, max_len=24)
    assert learned.decoder.layers[0].self_attn.rotary is None  # the other schemes are untouched


def test_a_rotary_causal_lm_rejects_what_it_cannot_place():
    with pytest.raises(ValueError, match=r"positional must be one of \['learned', 'rotary', 'sinusoidal'\]"):
        tfm.CausalLM(20, d_model=32, n_heads=4, positional="alibi")
    with pytest.raises(ValueError, match="do not fit the rotary embedding of max_len=24"):
        _rotary_lm()(torch.zeros(1, 25, dtype=torch.long))
