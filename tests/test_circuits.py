"""tfm.circuits: the per-head matrices reproduce the layers' own outputs; copying and composition scores are 1 where
a circuit is built to copy or to compose and small where it is not; removing a path changes only what it names."""

from __future__ import annotations

import pytest
import torch

import tfm
from tfm import circuits
from tfm.modern import ModernConfig, ModernLM


def _modern(n_layers: int = 2, seed: int = 0, tie_output: bool = False) -> ModernLM:
    torch.manual_seed(seed)
    return ModernLM(ModernConfig(n_vocab=11, d_model=16, n_layers=n_layers, n_heads=4, n_kv_heads=4, d_ff=32,
                                 max_len=12, tie_output=tie_output)).double()


def _by_hand(x, w_q, w_k, w_v, w_o, biases=(0.0, 0.0, 0.0, 0.0)):
    """Multi-head attention from the per-head matrices (no mask, no positions): (B, T, d) -> (B, T, d)."""
    q, k, v = (torch.einsum("btd,hde->bhte", x, w) + b for w, b in zip((w_q, w_k, w_v), biases[:3], strict=True))
    weights = torch.softmax(q @ k.transpose(-1, -2) / w_q.shape[-1] ** 0.5, dim=-1)  # (B, h, T, T)
    return torch.einsum("bhts,bhse,hed->btd", weights, v, w_o) + biases[3]


def test_head_matrices_reproduce_a_fused_layer():
    torch.manual_seed(0)
    attention = tfm.MultiHeadAttention(16, 4).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    b_q, b_k, b_v = (b.view(4, 1, 4) for b in attention.in_proj.bias.detach().chunk(3))
    mine = _by_hand(x, *circuits.head_matrices(attention), (b_q, b_k, b_v, attention.out_proj.bias.detach()))
    assert torch.allclose(mine, attention(x)[0], atol=1e-10)
    qk, ov = circuits.qk_ov(attention)
    w_q, w_k, w_v, w_o = circuits.head_matrices(attention)
    assert qk.shape == ov.shape == (4, 16, 16)
    assert torch.allclose(ov[1], w_v[1] @ w_o[1]) and torch.allclose(qk[2], w_q[2] @ w_k[2].T)


def test_head_matrices_of_separate_projections():
    attention = _modern().layers[0].self_attn
    w_q, w_k, w_v, w_o = circuits.head_matrices(attention)
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    assert torch.allclose(torch.einsum("btd,hde->bhte", x, w_v).transpose(1, 2).flatten(2),
                          attention.v_proj(x), atol=1e-12)
    z = torch.randn(1, 4, 3, 4, dtype=torch.float64)  # (B, h, T, d_k): what each head hands to W_O
    assert torch.allclose(torch.einsum("bhte,hed->btd", z, w_o), attention.o_proj(z.transpose(1, 2).flatten(2)))


def test_a_copying_head_scores_one_and_its_negative_minus_one():
    model = _modern(n_layers=1, tie_output=True)  # W_U = W_Eᵀ: W_E W_OV W_U is W_E P W_Eᵀ for a projection P
    attention = model.layers[0].self_attn
    d_k = 4
    with torch.no_grad():
        for p in (attention.v_proj.weight, attention.o_proj.weight):
            p.zero_()
        # head 0: W_OV = the identity on the first 4 dimensions; head 1: minus that
        attention.v_proj.weight[:d_k, :d_k] = torch.eye(d_k)
        attention.o_proj.weight[:d_k, :d_k] = torch.eye(d_k)
        attention.v_proj.weight[d_k:2 * d_k, :d_k] = torch.eye(d_k)
        attention.o_proj.weight[:d_k, d_k:2 * d_k] = -torch.eye(d_k)
    scores = circuits.ov_copying_scores(model)
    assert scores.shape == (1, 4)
    assert scores[0, 0] == pytest.approx(1.0, abs=1e-6) and scores[0, 1] == pytest.approx(-1.0, abs=1e-6)
    random_heads = torch.cat([circuits.ov_copying_scores(_modern(n_layers=1, seed=s)).flatten() for s in range(20)])
    assert random_heads.mean().abs() < 0.1 and random_heads.min() < 0 < random_heads.max()  # no sign on average


def test_composition_scores_find_the_head_whose_keys_read_the_earlier_head():
    model = _modern()
    early, late = model.layers[0].self_attn, model.layers[1].self_attn
    with torch.no_grad():
        for p in (early.v_proj.weight, early.o_proj.weight, late.k_proj.weight):
            p.zero_()
        early.v_proj.weight[:4, :4] = torch.eye(4)  # head 0 of layer 0 writes into dimensions 8..11
        early.o_proj.weight[8:12, :4] = torch.eye(4)
        late.k_proj.weight[4:8, 8:12] = torch.eye(4)  # head 1 of layer 1 builds its keys from dimensions 8..11
        late.q_proj.weight[:, 8:12] = 0.0  # and no query reads them
    k = circuits.composition_scores(model, later=1, earlier=0, kind="K")
    q = circuits.composition_scores(model, later=1, earlier=0, kind="Q")
    assert k.shape == (4, 4)
    assert k[1, 0] > 0.3 and k[1, 0] == k.max()
    assert q.max() == 0.0  # nothing layer 0 writes reaches a query
    assert circuits.composition_scores(model, 1, 0, "V").shape == (4, 4)
    with pytest.raises(ValueError, match="need 0 <= earlier < later < 2 layers"):
        circuits.composition_scores(model, later=0, earlier=1)
    with pytest.raises(ValueError, match="kind must be 'Q', 'K' or 'V'"):
        circuits.composition_scores(model, 1, 0, kind="O")


def test_removing_a_path_changes_only_the_inputs_named():
    model = _modern()
    ids = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(1))
    full = model(ids)
    block0, block1 = model.layers
    mask = tfm.causal_mask(12, 12)

    def by_hand(inputs: str) -> torch.Tensor:
        x = model.embed_tokens(ids)
        written, _ = block0.self_attn(block0.input_layernorm(x), mask)
        h = x + written
        x1 = h + block0.mlp(block0.post_attention_layernorm(h))
        clean, cut = block1.input_layernorm(x1), block1.input_layernorm(x1 - written)
        attention = block1.self_attn
        saved = {name: getattr(attention, f"{name}_proj") for name in "qkv"}
        for name in inputs:  # a projection that reads the stream without layer 0's attention output
            linear = saved[name]
            setattr(attention, f"{name}_proj", _Shifted(linear, cut - clean))
        try:
            out, _ = attention(clean, mask)
        finally:
            for name, linear in saved.items():
                setattr(attention, f"{name}_proj", linear)
        h1 = x1 + out
        x2 = h1 + block1.mlp(block1.post_attention_layernorm(h1))
        return model.lm_head(model.norm(x2))

    for inputs in ["k", "q", "v", "qv"]:
        with circuits.path_removed(model, source=0, target=1, inputs=inputs):
            patched = model(ids)
        assert torch.allclose(patched, by_hand(inputs), atol=1e-10), inputs
        assert not torch.allclose(patched, full, atol=1e-6)
    assert torch.allclose(model(ids), full)  # the hooks are gone
    with pytest.raises(ValueError, match="inputs must be made of"):
        with circuits.path_removed(model, 0, 1, inputs="x"):
            pass
    with pytest.raises(TypeError, match="needs a tfm.modern.ModernLM"):
        with circuits.path_removed(tfm.CausalLM(11, d_model=16, n_heads=4, n_layers=2), 0, 1):
            pass


class _Shifted(torch.nn.Module):
    """A linear layer applied to its input plus a fixed shift (the stream without an earlier output)."""

    def __init__(self, linear, shift):
        super().__init__()
        self.linear, self.shift = linear, shift

    def forward(self, x):
        return self.linear(x + self.shift)
