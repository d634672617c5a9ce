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
