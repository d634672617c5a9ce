"""Wrong calls raise ValueError/TypeError with a message that names the offending sizes or values."""

from __future__ import annotations

import pytest
import torch

import tfm
from tfm.data import pad, random_batches


def enc_dec(**overrides):
    config = dict(src_vocab=10, tgt_vocab=10, d_model=16, n_heads=4, n_encoder_layers=1, n_decoder_layers=1,
                  d_ff=32, max_len=20)
    config.update(overrides)
    return tfm.EncoderDecoder(tfm.TransformerConfig(**config)).eval()


CASES = [
    ("query/key widths differ", ValueError, r"query width 8 differs from key width 6",
     lambda: tfm.attention(torch.randn(3, 8), torch.randn(4, 6), torch.randn(4, 6))),
    ("1-D query", ValueError, r"query must have shape \(\.\.\., length, width\).*got \(8,\)",
     lambda: tfm.attention(torch.randn(8), torch.randn(4, 8), torch.randn(4, 8))),
    ("keys and values differ in length", ValueError, r"keys \(4, 8\) and values \(5, 8\)",
     lambda: tfm.fast_attention(torch.randn(3, 8), torch.randn(4, 8), torch.randn(5, 8))),
    ("integer query", TypeError, r"floating-point tensor, got dtype torch.int64",
     lambda: tfm.attention(torch.ones(3, 8, dtype=torch.long), torch.randn(4, 8), torch.randn(4, 8))),
    ("mask of the wrong shape", ValueError, r"mask of shape \(3, 5\) does not broadcast .* \(3, 4\)",
     lambda: tfm.attention(torch.randn(3, 8), torch.randn(4, 8), torch.randn(4, 8),
                           mask=torch.ones(3, 5, dtype=torch.bool))),
    ("float mask", TypeError, r"mask must be a boolean tensor .*got dtype torch.float32",
     lambda: tfm.attention(torch.randn(3, 8), torch.randn(4, 8), torch.randn(4, 8), mask=torch.rand(3, 4))),
    ("d_model not divisible by heads", ValueError, r"d_model=10 is not divisible by n_heads=4",
     lambda: tfm.MultiHeadAttention(10, 4)),
    ("input width differs from d_model", ValueError, r"shape \(B, length, d_model=16\), got \(2, 5, 12\)",
     lambda: tfm.MultiHeadAttention(16, 4)(torch.randn(2, 5, 12))),
    ("empty batch", ValueError, r"empty batch \(shape \(0, 5, 16\)\)",
     lambda: tfm.MultiHeadAttention(16, 4)(torch.randn(0, 5, 16))),
    ("memory batch differs", ValueError, r"x has batch size 2 but memory has 3",
     lambda: tfm.MultiHeadAttention(16, 4)(torch.randn(2, 5, 16), torch.randn(3, 7, 16))),
    ("sequence longer than the positional table", ValueError, r"positions 0\.\.11 do not fit .* max_len=10",
     lambda: tfm.SinusoidalPositionalEncoding(16, max_len=10)(torch.randn(1, 12, 16))),
    ("learned positions too long", ValueError, r"positions 8\.\.10 do not fit .* max_len=10",
     lambda: tfm.LearnedPositionalEmbedding(16, max_len=10)(torch.randn(1, 3, 16), start=8)),
    ("odd d_model for the sinusoidal table", ValueError, r"even d_model >= 2, got 100 and 15",
     lambda: tfm.sinusoidal_table(100, 15)),
    ("odd head width for RoPE", ValueError, r"even head width >= 2, got d_head=7",
     lambda: tfm.RotaryEmbedding(7)),
    ("token ids outside the vocabulary", ValueError, r"must lie in \[0, 10\) .* found values 0\.\.12",
     lambda: tfm.TokenEmbedding(10, 16)(torch.tensor([[0, 12]]))),
    ("float token ids", TypeError, r"integer tensor \(torch.long\), got dtype torch.float32",
     lambda: tfm.TokenEmbedding(10, 16)(torch.tensor([[1.0, 2.0]]))),
    ("unknown activation", ValueError, r"activation must be one of \['gelu', 'relu'\], got 'tanh'",
     lambda: tfm.FeedForward(16, 32, activation="tanh")),
    ("unknown device", ValueError, r"unknown device 'tpu'",
     lambda: tfm.get_device("tpu")),
    ("label smoothing out of range", ValueError, r"smoothing must lie in \[0, 1\), got 1.5",
     lambda: tfm.LabelSmoothingLoss(1.5)),
    ("warmup of zero", ValueError, r"warmup must be >= 1, got 0",
     lambda: tfm.noam_rate(10, 512, 0)),
    ("logits/target shapes", ValueError, r"logits \(2, 5, 7\) must be target \(2, 4\) plus a vocabulary",
     lambda: tfm.LabelSmoothingLoss()(torch.randn(2, 5, 7), torch.zeros(2, 4, dtype=torch.long))),
    ("negative lengths", ValueError, r"lengths must be >= 0, got \[3, -1\]",
     lambda: tfm.padding_mask([3, -1])),
    ("max_len shorter than a sequence", ValueError, r"max_len=2 is shorter than the longest sequence \(3\)",
     lambda: tfm.padding_mask([3, 1], max_len=2)),
    ("causal mask with more queries than keys", ValueError, r"n_queries=5, n_keys=3",
     lambda: tfm.causal_mask(5, 3)),
    ("a sliding window of zero", ValueError, r"window must be a positive int .*got 0",
     lambda: tfm.causal_mask(4, window=0)),
    ("a language model with a float window", ValueError, r"window must be a positive int .*got 2.5",
     lambda: tfm.CausalLM(9, 16, 4, 1, 32, max_len=16, window=2.5)),
    ("shared embeddings with two vocabularies", ValueError, r"src_vocab=10, tgt_vocab=12",
     lambda: tfm.TransformerConfig(src_vocab=10, tgt_vocab=12, share_embeddings=True)),
    ("beam size zero", ValueError, r"beam_size must be >= 1, got 0",
     lambda: tfm.beam_search(enc_dec(), torch.randint(4, 10, (1, 5)), 5, 1, 2, beam_size=0)),
    ("decoding beyond the positional table", ValueError, r"max_len must lie in \[1, 20\).*got 25",
     lambda: tfm.greedy_decode(enc_dec(), torch.randint(4, 10, (1, 5)), 25, 1, 2)),
    ("1-D source ids", ValueError, r"src must be token ids of shape \(B, S\), got \(5,\)",
     lambda: enc_dec().encode(torch.randint(4, 10, (5,)))),
    ("src/tgt batch sizes", ValueError, r"src has batch size 2 but tgt has 3",
     lambda: enc_dec()(torch.randint(4, 10, (2, 5)), torch.randint(4, 10, (3, 4)))),
    ("prompt too long for generation", ValueError, r"prompt length 6 \+ n_new 20 exceeds the model's max_len 16",
     lambda: tfm.generate(tfm.CausalLM(9, 16, 4, 1, 32, max_len=16), torch.zeros(1, 6, dtype=torch.long), 20)),
    ("top_k out of range", ValueError, r"top_k must lie in \[1, 9\], got 0",
     lambda: tfm.generate(tfm.CausalLM(9, 16, 4, 1, 32, max_len=16), torch.zeros(1, 2, dtype=torch.long), 3,
                          top_k=0)),
    ("top_p out of range", ValueError, r"top_p must lie in \(0, 1\], got 1.5",
     lambda: tfm.generate(tfm.CausalLM(9, 16, 4, 1, 32, max_len=16), torch.zeros(1, 2, dtype=torch.long), 3,
                          top_p=1.5)),
    ("padding nothing", ValueError, r"cannot pad an empty list",
     lambda: pad([], 0)),
    ("a batch size of zero", ValueError, r"batch_size >= 1 and some pairs, got batch_size=0",
     lambda: next(random_batches([(["a"], ["b"])], 0, None, None))),
    ("plotting weights of the wrong shape", ValueError, r"weights have shape \(2, 3\) but there are 2 query and 2 key",
     lambda: tfm.viz.plot_attention(torch.rand(2, 3), ["a", "b"])),
]


@pytest.mark.parametrize("error,pattern,call", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_named(error, pattern, call):
    with pytest.raises(error, match=pattern):
        call()


def test_there_are_at_least_fifteen_distinct_bad_calls():
    assert len({c[0] for c in CASES}) >= 15
