"""tfm.modern, today's decoder block, against Hugging Face's Llama and PyTorch's own RMSNorm, weights copied across:
RMSNorm, SwiGLU, rotary positions in both layouts, grouped-query attention, the whole model's logits, generation
with and without the key/value cache, parameter counts from a configuration, and cache bytes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tfm
from tfm.modern import (
    GroupedQueryAttention,
    ModernConfig,
    ModernLM,
    RMSNorm,
    SwiGLU,
    config_from_llama,
    from_llama,
    kv_cache_bytes,
    parameter_count,
    swiglu_width,
)

llama = pytest.importorskip("transformers.models.llama.modeling_llama")
LlamaConfig, LlamaForCausalLM = llama.LlamaConfig, llama.LlamaForCausalLM
MistralConfig = pytest.importorskip("transformers.models.mistral.configuration_mistral").MistralConfig
Qwen2Config = pytest.importorskip("transformers.models.qwen2.configuration_qwen2").Qwen2Config


def small_llama(n_kv_heads: int, tie: bool = False, seed: int = 0, init: float = 0.02) -> nn.Module:
    """A random Llama; ``init`` (the weights' standard deviation) above Llama's 0.02 makes attention sharp, so that a
    position off by one changes the outputs visibly."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=n_kv_heads, max_position_embeddings=64,
                         tie_word_embeddings=tie, attn_implementation="eager", initializer_range=init,
                         bos_token_id=None, eos_token_id=None)  # no token ends Hugging Face's generation early
    return LlamaForCausalLM(config).eval()


def test_rmsnorm_equals_torch_and_llama():
    x = torch.randn(3, 5, 16) * 4 + 1
    ours = RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        ours.weight.copy_(torch.rand(16) + 0.5)
    theirs = nn.RMSNorm(16, eps=1e-6)
    hf = llama.LlamaRMSNorm(16, eps=1e-6)
    theirs.load_state_dict(ours.state_dict())
    hf.load_state_dict(ours.state_dict())
    assert (ours(x) - theirs(x)).abs().max() < 1e-5
    assert (ours(x) - hf(x)).abs().max() < 1e-6
    assert (ours(x.bfloat16()) - hf(x.bfloat16())).abs().max() == 0  # float32 inside, as Llama: the same bits
    # unlike LayerNorm, the mean is not removed: a constant vector keeps its sign and size after the gain
    constant = torch.full((1, 16), 3.0)
    assert torch.allclose(RMSNorm(16)(constant), torch.ones(1, 16), atol=1e-5)


def test_swiglu_equals_llama_mlp():
    config = LlamaConfig(hidden_size=32, intermediate_size=48)
    hf = llama.LlamaMLP(config)
    ours = SwiGLU(32, 48)
    ours.load_state_dict(hf.state_dict())
    x = torch.randn(2, 7, 32)
    assert (ours(x) - hf(x)).abs().max() < 1e-6


def test_swiglu_width_matches_the_parameters_of_a_4x_ffn():
    for d_model in (64, 512, 4096):
        ffn = 2 * d_model * 4 * d_model  # two matrices, no biases
        gated = 3 * d_model * swiglu_width(d_model)
        assert abs(gated - ffn) / ffn < 0.01
    assert swiglu_width(4096, multiple_of=256) == 11008  # Llama-2-7B's intermediate_size

    def meta(d_model, multiple_of=256):  # Llama's own recipe: int() truncates, then round up
        hidden = int(2 * 4 * d_model / 3)
        return multiple_of * ((hidden + multiple_of - 1) // multiple_of)

    assert [swiglu_width(d, multiple_of=256) for d in (4096, 5120)] == [meta(d) for d in (4096, 5120)] == [11008,
                                                                                                       13824]
    assert (swiglu_width(64), meta(64, multiple_of=1)) == (171, 170)  # nearest against truncated: 170.67


def test_rotate_half_layout_equals_hugging_face_and_is_a_reordering_of_the_interleaved_one():
    config = LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64)
    q, k = torch.randn(1, 4, 12, 16), torch.randn(1, 4, 12, 16)  # (B, h, T, d_k)
    positions = torch.arange(3, 15)[None]  # (1, T)
    cos, sin = llama.LlamaRotaryEmbedding(config)(q, positions)
    hf_q, hf_k = llama.apply_rotary_pos_emb(q, k, cos, sin)
    half = tfm.RotaryEmbedding(16, max_len=64, layout="half")
    assert (hf_q - half(q, start=3)).abs().max() < 1e-5 and (hf_k - half(k, start=3)).abs().max() < 1e-5
    perm = tfm.positional.half_layout_permutation(16)
    interleaved = tfm.RotaryEmbedding(16, max_len=64)
    assert (interleaved(q, start=3)[..., perm] - half(q[..., perm], start=3)).abs().max() < 1e-5
    assert (interleaved(q, start=3) - half(q, start=3)).abs().max() > 1e-2  # the layouts are not interchangeable
    with pytest.raises(ValueError, match="layout must be one of"):
        tfm.RotaryEmbedding(16, layout="rotate")


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_model_logits_equal_llama_for_causal_lm(n_kv_heads, tie):
    hf = small_llama(n_kv_heads, tie)
    ours = from_llama(hf).eval()
    ids = torch.randint(0, 100, (3, 20))
    with torch.no_grad():
        assert (ours(ids) - hf(ids).logits).abs().max() < 1e-5
    assert tfm.count_parameters(ours) == sum(p.numel() for p in hf.parameters())


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
def test_cached_generation_equals_recomputation_and_hugging_face(n_kv_heads):
    hf = small_llama(n_kv_heads, seed=1, init=0.3).double()  # float64: no float32 near-tie decides a token
    ours = from_llama(hf).eval()
    prompt = torch.randint(0, 100, (2, 5))
    cached = tfm.generate(ours, prompt, n_new=12, temperature=0, use_cache=True)
    recomputed = tfm.generate(ours, prompt, n_new=12, temperature=0, use_cache=False)
    assert torch.equal(cached, recomputed)
    with torch.no_grad():
        theirs = hf.generate(prompt, max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(prompt),
                             pad_token_id=0)
    assert torch.equal(cached, theirs)


@pytest.mark.parametrize("n_kv_heads", [4, 1], ids=["MHA", "MQA"])
def test_incremental_logits_equal_the_full_forward_pass(n_kv_heads):
    model = from_llama(small_llama(n_kv_heads, seed=2, init=0.3)).eval().double()  # float64: no round-off
    ids = torch.randint(0, 100, (2, 16))
    caches = model.new_caches()
    with torch.no_grad():
        full = model(ids)  # (B, T, n_vocab)
        steps = [model(ids[:, :6], caches=caches)] + [model(ids[:, t : t + 1], caches=caches, start=t)
                                                      for t in range(6, 16)]
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-10


def test_cache_keeps_only_the_key_value_heads_and_its_bytes_are_counted():
    model = ModernLM(ModernConfig(n_vocab=50, d_model=64, n_layers=3, n_heads=8, n_kv_heads=2, max_len=64))
    caches = model.new_caches()
    with torch.no_grad():
        model(torch.randint(0, 50, (2, 10)), caches=caches)
    assert caches[0]["k"].shape == (2, 2, 10, 8)  # (B, h_kv, T, d_k): 2 heads cached, not 8
    measured = sum(t.numel() * t.element_size() for cache in caches for t in cache.values())
    assert measured == kv_cache_bytes(3, 2, 8, 10, batch=2, bytes_per_value=4)


def test_parameter_count_from_the_configuration_alone():
    config = LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=32)
    with torch.device("meta"):
        hf = LlamaForCausalLM(config)
    expected = sum(p.numel() for p in hf.parameters())
    assert expected == 6_738_415_616  # Llama-2-7B
    assert parameter_count(32000, 4096, 32, 32, 32, 11008) == expected
    small = ModernConfig(n_vocab=100, d_model=64, n_layers=2, n_heads=4, n_kv_heads=1, d_ff=96, tie_output=True)
    assert parameter_count(100, 64, 2, 4, 1, 96, tie_output=True) == tfm.count_parameters(ModernLM(small))


def test_config_from_llama_reads_the_sizes_and_refuses_what_it_does_not_implement():
    config = config_from_llama(small_llama(2).config)
    assert (config.d_model, config.n_heads, config.n_kv_heads, config.d_ff) == (64, 4, 2, 176)
    with pytest.raises(ValueError, match="attention_bias"):
        config_from_llama(LlamaConfig(hidden_size=64, num_attention_heads=4, attention_bias=True))
    windowed = LlamaConfig(hidden_size=64, num_attention_heads=4)
    windowed.sliding_window = 8  # what a Mistral checkpoint carries: silently ignored, its logits would differ
    with pytest.raises(ValueError, match="sliding_window attention"):
        config_from_llama(windowed)
    for other in (MistralConfig(hidden_size=64, num_attention_heads=4), Qwen2Config(hidden_size=64,
                                                                                   num_attention_heads=4)):
        with pytest.raises(ValueError, match=f"a '{other.model_type}' configuration: tfm.modern reads Llama"):
            config_from_llama(other)


def test_bad_sizes_get_clear_errors():
    with pytest.raises(ValueError, match="does not divide n_heads"):
        GroupedQueryAttention(64, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="even head width"):
        GroupedQueryAttention(36, n_heads=4)  # d_k = 9: rotary positions rotate pairs of features
    model = ModernLM(ModernConfig(n_vocab=20, d_model=32, n_heads=4, n_kv_heads=2, max_len=16))
    with pytest.raises(ValueError, match="exceed the model's max_len=16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        tfm.generate(model, torch.zeros(1, 10, dtype=torch.long), n_new=7)
    with pytest.raises(ValueError, match="n_kv_heads must be positive"):
        ModernConfig(n_vocab=20, n_kv_heads=0)


def test_at_long_sequences_the_difference_is_the_precision_of_the_angles():
    """tfm computes RoPE's angles pos · θ_i in float64 (then rounds cos and sin to float32); Hugging Face's Llama, like
    Meta's, computes them in float32, whose rounding grows with the position. At 2,048 positions with sharp attention
    the logits differ by about 3e-4; with the angles computed Hugging Face's way they agree to about 1e-5."""
    T = 2048
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=T,
                         attn_implementation="eager", initializer_range=0.2, bos_token_id=None, eos_token_id=None)
    llama = LlamaForCausalLM(config).eval()
    ours = from_llama(llama).eval()
    ids = torch.randint(0, 100, (1, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = llama(ids).logits
        apart = (ours(ids) - theirs).abs().max().item()
        for module in ours.modules():
            if isinstance(module, tfm.RotaryEmbedding):  # the angles as Hugging Face computes them: in float32
                d = module.d_head
                inverse = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
                angles = torch.arange(module.max_len).float()[:, None] * inverse  # (T, d/2), float32
                module.cos, module.sin = angles.cos(), angles.sin()
        matched = (ours(ids) - theirs).abs().max().item()
    assert 1e-4 < apart < 2e-3 and matched < 3e-5, (apart, matched)
