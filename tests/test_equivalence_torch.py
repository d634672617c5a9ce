"""tfm against PyTorch's own implementations, weights copied across, float32, max abs difference <= 1e-5."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TOL, copy_mha, max_diff
from torch import nn

import tfm
from tfm.interop import torch_layer_state

SHAPES = {"self": (2, 3, 6, 6, 8), "cross": (2, 3, 5, 9, 8)}  # B, h, T, S, d_k


def masks_for(B, T, S):
    yield "none", None
    yield "padding", tfm.combine_masks(tfm.padding_mask([S, S - 2][:B], max_len=S))  # (B, 1, 1, S)
    if T == S:
        yield "causal", tfm.causal_mask(T)
        yield "padding+causal", tfm.combine_masks(tfm.padding_mask([S, S - 3][:B]), tfm.causal_mask(T))


@pytest.mark.parametrize("kind", ["self", "cross"])
@pytest.mark.parametrize("fn", [tfm.attention, tfm.fast_attention], ids=["explicit", "fast"])
def test_attention_matches_sdpa(kind, fn):
    B, h, T, S, d_k = SHAPES[kind]
    q, k, v = torch.randn(B, h, T, d_k), torch.randn(B, h, S, d_k), torch.randn(B, h, S, 5)
    for name, mask in masks_for(B, T, S):
        ours, _ = fn(q, k, v, mask=mask)
        theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert max_diff(ours, theirs) <= TOL, name


def test_explicit_weights_are_a_softmax_of_scaled_scores():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
    _, weights = tfm.attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)
    assert max_diff(weights, expected) <= 1e-6


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("fast", [True, False])
def test_multi_head_attention_matches_torch(cross, fast):
    d_model, h, B, T, S = 16, 4, 2, 5, 7 if cross else 5
    ours = tfm.MultiHeadAttention(d_model, h, fast=fast).eval()
    theirs = nn.MultiheadAttention(d_model, h, batch_first=True).eval()
    copy_mha(ours, theirs)
    x = torch.randn(B, T, d_model)
    memory = torch.randn(B, S, d_model) if cross else x
    keys = tfm.padding_mask([S, S - 3])  # (B, S)
    out, _ = ours(x, memory if cross else None, mask=tfm.combine_masks(keys))
    ref, _ = theirs(x, memory, memory, key_padding_mask=tfm.to_torch_key_padding_mask(keys))
    assert max_diff(out, ref) <= TOL
    if not cross:
        causal = tfm.causal_mask(T)
        out, weights = ours(x, mask=causal, need_weights=True)
        ref, ref_weights = theirs(x, x, x, attn_mask=tfm.to_torch_attn_mask(causal), average_attn_weights=False)
        assert max_diff(out, ref) <= TOL and max_diff(weights, ref_weights) <= TOL


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    ours = tfm.EncoderLayer(16, 4, 32, dropout=0.1, activation=activation, norm_first=norm_first).eval()
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation=activation, batch_first=True,
                                        norm_first=norm_first).eval()
    theirs.load_state_dict(torch_layer_state(ours))
    x, keys = torch.randn(2, 6, 16), tfm.padding_mask([6, 4])
    out, _ = ours(x, tfm.combine_masks(keys))
    ref = theirs(x, src_key_padding_mask=tfm.to_torch_key_padding_mask(keys))
    assert max_diff(out[0], ref[0]) <= TOL and max_diff(out[1, :4], ref[1, :4]) <= TOL


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_matches_torch(norm_first, activation):
    ours = tfm.DecoderLayer(16, 4, 32, dropout=0.1, activation=activation, norm_first=norm_first).eval()
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.1, activation=activation, batch_first=True,
                                        norm_first=norm_first).eval()
    theirs.load_state_dict(torch_layer_state(ours))
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    causal, src_keys = tfm.causal_mask(5), tfm.padding_mask([7, 5])
    out, _ = ours(x, memory, self_mask=causal, memory_mask=tfm.combine_masks(src_keys))
    ref = theirs(x, memory, tgt_mask=tfm.to_torch_attn_mask(causal),
                 memory_key_padding_mask=tfm.to_torch_key_padding_mask(src_keys))
    assert max_diff(out, ref) <= TOL


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_decoder_stacks_match_nn_transformer(norm_first):
    d_model, h, d_ff = 16, 4, 32
    encoder = tfm.Encoder(2, d_model, h, d_ff, norm_first=norm_first, final_norm=True).eval()
    decoder = tfm.Decoder(2, d_model, h, d_ff, norm_first=norm_first, final_norm=True).eval()
    theirs = nn.Transformer(d_model, h, 2, 2, d_ff, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    state = {}
    for prefix, stack in (("encoder", encoder), ("decoder", decoder)):
        for i, layer in enumerate(stack.layers):
            for name, value in torch_layer_state(layer).items():
                state[f"{prefix}.layers.{i}.{name}"] = value
        state[f"{prefix}.norm.weight"], state[f"{prefix}.norm.bias"] = stack.norm.weight, stack.norm.bias
    theirs.load_state_dict(state)
    src, tgt = torch.randn(2, 7, d_model), torch.randn(2, 5, d_model)
    src_keys, causal = tfm.padding_mask([7, 4]), tfm.causal_mask(5)
    memory, _ = encoder(src, tfm.combine_masks(src_keys))
    out, _ = decoder(tgt, memory, causal, tfm.combine_masks(src_keys))
    ref = theirs(src, tgt, tgt_mask=tfm.to_torch_attn_mask(causal),
                 src_key_padding_mask=tfm.to_torch_key_padding_mask(src_keys),
                 memory_key_padding_mask=tfm.to_torch_key_padding_mask(src_keys))
    assert max_diff(out, ref) <= TOL


def test_label_smoothing_matches_cross_entropy():
    logits, target = torch.randn(4, 6, 11), torch.randint(0, 11, (4, 6))
    target[0, :2] = 0  # padding, ignored
    ours = tfm.LabelSmoothingLoss(0.1, ignore_index=0)(logits, target)
    theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=0.1, ignore_index=0)
    assert abs(ours.item() - theirs.item()) <= 1e-6
    plain = tfm.LabelSmoothingLoss(0.0)(logits, target)
    assert abs(plain.item() - F.cross_entropy(logits.flatten(0, 1), target.flatten()).item()) <= 1e-6


def test_noam_rate_follows_the_paper():
    d_model, warmup = 512, 4000
    for step in (1, 100, 4000, 10000):
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert tfm.noam_rate(step, d_model, warmup) == pytest.approx(expected)
    rates = [tfm.noam_rate(s, d_model, warmup) for s in range(1, 12000)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == warmup
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = tfm.noam_scheduler(optimizer, d_model, warmup, factor=2.0)
    for _ in range(9):
        optimizer.step()
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2.0 * tfm.noam_rate(10, d_model, warmup))
