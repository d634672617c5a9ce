"""tfm.lora against Hugging Face's PEFT, adapter weights copied across: logits, gradients of every A and B and the
trainable parameters on a small random Llama and on tfm's ModernLM built from it; merged weights against PEFT's
merge_and_unload; the start from B = 0 and a training step that leaves the base untouched; Adam's bytes against a
count from the shapes and against what torch.optim.Adam allocates; every bad input."""

from __future__ import annotations

import copy
import math

import peft  # requirements.txt pins it: the reference, never skipped
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from tfm import lora
from tfm.distributed import ADAM_AUTOCAST_BYTES
from tfm.modern import from_llama

D_MODEL, D_FF, N_LAYERS, N_HEADS, N_KV_HEADS, N_VOCAB = 64, 128, 2, 4, 2, 100
TARGETS = ("q_proj", "v_proj", "down_proj")  # PEFT's target_modules
MODERN_TARGETS = ("self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj")  # the same layers, by a longer name
R, ALPHA = 4, 8
IDS = torch.randint(0, N_VOCAB, (2, 12), generator=torch.Generator().manual_seed(2))  # (B, T)
# PEFT calls a method that transformers 5 has deprecated
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")


def small_llama(dtype: torch.dtype = torch.float32, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=N_VOCAB, hidden_size=D_MODEL, intermediate_size=D_FF, num_hidden_layers=N_LAYERS,
                         num_attention_heads=N_HEADS, num_key_value_heads=N_KV_HEADS, max_position_embeddings=64,
                         attn_implementation="eager", bos_token_id=None, eos_token_id=None)
    return LlamaForCausalLM(config).to(dtype).eval()


def peft_lora(model: nn.Module, dropout: float = 0.0, use_rslora: bool = False) -> nn.Module:
    """PEFT's LoRA on a copy of ``model``, with B set to random values (at PEFT's B = 0 every comparison of the
    adapter would hold trivially)."""
    config = peft.LoraConfig(r=R, lora_alpha=ALPHA, target_modules=list(TARGETS), lora_dropout=dropout,
                             use_rslora=use_rslora)
    wrapped = peft.get_peft_model(copy.deepcopy(model), config)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.dtype))
    return wrapped


def ours_name(peft_name: str, modern: bool = False) -> str:
    """base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight -> model.layers.0.self_attn.q_proj.lora_A
    (without "model." for tfm's ModernLM, as in tfm.modern.from_llama)."""
    name = peft_name.removeprefix("base_model.model.").replace(".default.weight", "")
    return name.removeprefix("model.") if modern else name


def copy_adapters(theirs: nn.Module, ours: nn.Module, modern: bool = False) -> None:
    """Copy PEFT's A and B into tfm's; the two must have the same trainable parameters, name for name."""
    adapters = {ours_name(n, modern): p for n, p in theirs.named_parameters() if p.requires_grad}
    assert set(adapters) == {n for n, p in ours.named_parameters() if p.requires_grad}
    with torch.no_grad():
        for name, p in adapters.items():
            ours.get_parameter(name).copy_(p)


def loss_and_grads(model: nn.Module, rename=lambda name: name) -> tuple[torch.Tensor, dict]:
    """One backward pass of the next-token loss on IDS: the logits and the gradient of every trainable parameter,
    by its tfm name (``rename`` maps PEFT's names)."""
    output = model(IDS)
    logits = output if isinstance(output, torch.Tensor) else output.logits  # (B, T, n_vocab)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, N_VOCAB), IDS[:, 1:].reshape(-1))
    loss.backward()
    return logits.detach(), {rename(n): p.grad for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("use_rslora", [False, True])
def test_equals_peft_on_llama(use_rslora):
    base = small_llama()
    theirs = peft_lora(base, use_rslora=use_rslora)
    ours = lora.add_lora(copy.deepcopy(base), TARGETS, r=R, alpha=ALPHA, use_rslora=use_rslora)
    copy_adapters(theirs, ours)
    assert lora.trainable_parameters(ours) == theirs.get_nb_trainable_parameters()[0] == N_LAYERS * R * (
        (D_MODEL + D_MODEL) + (D_MODEL + N_KV_HEADS * D_MODEL // N_HEADS) + (D_FF + D_MODEL))  # q, v, down
    assert sum(p.numel() for p in ours.parameters()) == theirs.get_nb_trainable_parameters()[1]
    logits_theirs, grads_theirs = loss_and_grads(theirs, ours_name)
    logits_ours, grads_ours = loss_and_grads(ours)
    assert (logits_ours - base(IDS).logits).abs().max() > 0.1  # the adapter changes the outputs visibly
    assert (logits_ours - logits_theirs).abs().max() < 1e-6  # measured 0 (the same operations in the same order)
    assert grads_ours.keys() == grads_theirs.keys() and len(grads_ours) == 2 * N_LAYERS * len(TARGETS)
    for name, grad in grads_ours.items():
        assert grad.abs().max() > 0, name  # A and B both learn once B is not zero
        assert (grad - grads_theirs[name]).abs().max() < 1e-6, name  # measured 1.5e-8
    scaling = ALPHA / math.sqrt(R) if use_rslora else ALPHA / R
    assert ours.model.layers[0].self_attn.q_proj.scaling == scaling
    assert theirs.base_model.model.model.layers[0].self_attn.q_proj.scaling["default"] == scaling


def test_dropout_equals_peft_in_training():
    base = small_llama()
    theirs = peft_lora(base, dropout=0.25).train()
    ours = lora.add_lora(copy.deepcopy(base), TARGETS, r=R, alpha=ALPHA, dropout=0.25).train()
    copy_adapters(theirs, ours)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        logits_theirs = theirs(IDS).logits
        torch.manual_seed(3)
        logits_ours = ours(IDS).logits  # the same dropout masks: drawn in the same order, of the same shapes
    assert (logits_ours - logits_theirs).abs().max() < 1e-6
    assert (logits_ours - ours.eval()(IDS).logits).abs().max() > 1e-3  # dropout did drop something


def test_modern_lm_equals_peft_on_llama():
    base = small_llama(torch.float64)
    theirs = peft_lora(base)
    ours = lora.add_lora(from_llama(base), MODERN_TARGETS, r=R, alpha=ALPHA)
    copy_adapters(theirs, ours, modern=True)
    assert lora.trainable_parameters(ours) == theirs.get_nb_trainable_parameters()[0]
    logits_theirs, grads_theirs = loss_and_grads(theirs, lambda n: ours_name(n, modern=True))
    logits_ours, grads_ours = loss_and_grads(ours)
    # Not bit for bit even in float64: Hugging Face computes the rotary angles in float32 (the BOOK's section 11), and
    # the two base models already differ by ~6e-8 (measured), with or without LoRA; a wrong adapter moves them by 0.1+.
    with torch.no_grad():
        assert (from_llama(base)(IDS) - base(IDS).logits).abs().max() < 1e-6
    assert (logits_ours - logits_theirs).abs().max() < 1e-6  # measured 7e-8
    assert grads_ours.keys() == grads_theirs.keys() and len(grads_ours) == 2 * N_LAYERS * len(TARGETS)
    for name, grad in grads_ours.items():
        assert (grad - grads_theirs[name]).abs().max() < 1e-7, name  # measured 1.3e-8, gradients up to 0.07


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_merge_equals_unmerged_and_peft(dtype, tolerance):
    base = small_llama(dtype)
    theirs = peft_lora(base)
    ours = lora.add_lora(copy.deepcopy(base), TARGETS, r=R, alpha=ALPHA)
    copy_adapters(theirs, ours)
    with torch.no_grad():
        unmerged = ours(IDS).logits
        merged = lora.merge_lora(ours)
        assert not any(isinstance(m, lora.LoRALinear) for m in merged.modules())
        assert type(merged.model.layers[1].mlp.down_proj) is nn.Linear
        theirs_merged = theirs.merge_and_unload()
        assert merged.state_dict().keys() == theirs_merged.state_dict().keys() == base.state_dict().keys()
        for name, weight in merged.state_dict().items():
            assert (weight - theirs_merged.state_dict()[name]).abs().max() <= tolerance * weight.abs().max(), name
        assert (merged(IDS).logits - unmerged).abs().max() < tolerance
        assert (merged(IDS).logits - theirs_merged(IDS).logits).abs().max() < tolerance
        single = lora.LoRALinear(nn.Linear(6, 5, dtype=dtype), r=2, alpha=3)
        single.lora_B.normal_()
        x = torch.randn(3, 6, dtype=dtype)  # (n, d_in)
        expected = x @ (single.base_layer.weight + 1.5 * single.lora_B @ single.lora_A).T + single.base_layer.bias
        assert (single.merge()(x) - expected).abs().max() < tolerance
        assert (single(x) - expected).abs().max() < tolerance


def test_starts_as_the_base_and_trains_only_a_and_b():
    base = small_llama()
    ours = lora.add_lora(copy.deepcopy(base), TARGETS, r=R, alpha=ALPHA)
    assert torch.equal(ours(IDS).logits, base(IDS).logits)  # B = 0: the same numbers, bit for bit
    for module in ours.modules():
        if isinstance(module, lora.LoRALinear):
            bound = 1 / math.sqrt(module.lora_A.shape[1])  # Kaiming-uniform with a = √5: U(-1/√d_in, 1/√d_in)
            assert 0 < module.lora_A.abs().max() <= bound
            assert torch.equal(module.lora_B, torch.zeros_like(module.lora_B))
    before = {n: p.detach().clone() for n, p in ours.named_parameters()}
    assert sum(".lora_" not in n for n in before) == len(list(base.parameters()))  # every base weight, frozen
    optimizer = torch.optim.Adam(ours.parameters(), lr=1e-2)
    for step in range(2):
        optimizer.zero_grad(set_to_none=True)
        _, grads = loss_and_grads(ours)
        for name, p in ours.named_parameters():
            assert (p.grad is not None) == (".lora_" in name), name  # only A and B receive gradients
        for name, grad in grads.items():  # while B = 0, A's gradient (through B) is zero: B moves first, A next
            assert (grad.abs().max() > 0) == (name.endswith("lora_B") or step == 1), (step, name)
        optimizer.step()
    for name, p in ours.named_parameters():
        assert torch.equal(p, before[name]) == (".lora_" not in name), name  # the base unchanged, A and B moved
    assert not torch.equal(ours(IDS).logits, base(IDS).logits)


def test_adam_bytes_counted_from_the_shapes():
    for dtype in (torch.float32, torch.bfloat16):
        size = torch.finfo(dtype).bits // 8  # bytes per number
        d_kv = N_KV_HEADS * D_MODEL // N_HEADS
        per_layer = (2 * D_MODEL * D_MODEL + 2 * D_MODEL * d_kv  # W_Q, W_O; W_K, W_V
                     + 3 * D_MODEL * D_FF + 2 * D_MODEL)  # SwiGLU's three matrices, two norm gains
        n_base = N_LAYERS * per_layer + 2 * N_VOCAB * D_MODEL + D_MODEL  # + embeddings, lm_head, final norm
        n_lora = N_LAYERS * R * ((D_MODEL + D_MODEL) + (D_MODEL + d_kv) + (D_FF + D_MODEL))  # r (d_in + d_out) each
        model = small_llama(dtype)
        full = lora.adam_bytes(model)
        assert full == {"parameters": size * n_base, "gradients": size * n_base, "optimizer": 2 * size * n_base}
        if dtype == torch.float32:  # chapter 16's count of Adam under autocast: float32 weights, gradients, moments
            assert full == {part: b * n_base for part, b in ADAM_AUTOCAST_BYTES.items()}
        lora.add_lora(model, TARGETS, r=R, alpha=ALPHA)
        assert lora.trainable_parameters(model) == n_lora
        adapted = lora.adam_bytes(model)
        assert adapted == {"parameters": size * (n_base + n_lora), "gradients": size * n_lora,
                           "optimizer": 2 * size * n_lora}
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # and what torch really allocates
        loss_and_grads(model)
        optimizer.step()
        assert sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None) \
            == adapted["gradients"]
        moments = [t for state in optimizer.state.values() for key, t in state.items() if key != "step"]
        assert sum(t.numel() * t.element_size() for t in moments) == adapted["optimizer"]


def test_bad_inputs_are_named():
    linear = nn.Linear(8, 4)  # d_in = 8, d_out = 4
    with pytest.raises(ValueError, match=r"r=0"):
        lora.LoRALinear(linear, r=0, alpha=1)
    with pytest.raises(ValueError, match=r"r=-2"):
        lora.add_lora(small_llama(), TARGETS, r=-2, alpha=1)
    with pytest.raises(TypeError, match=r"2\.5"):
        lora.LoRALinear(linear, r=2.5, alpha=1)
    with pytest.raises(ValueError, match=r"r=5 .*d_in=8, d_out=4.*1\.\.4"):
        lora.LoRALinear(linear, r=5, alpha=1)
    model = small_llama()
    with pytest.raises(ValueError, match=r"r=40 .*model\.layers\.0\.self_attn\.v_proj.*d_in=64, d_out=32"):
        lora.add_lora(model, ("q_proj", "v_proj"), r=40, alpha=8)  # q_proj (64 -> 64) allows 40, v_proj does not
    assert lora.trainable_parameters(model) == sum(p.numel() for p in model.parameters())  # left as it was
    assert not any(isinstance(m, lora.LoRALinear) for m in model.modules())
    for alpha in (0, -1.0):
        with pytest.raises(ValueError, match=rf"alpha={alpha}"):
            lora.LoRALinear(linear, r=2, alpha=alpha)
    for dropout in (1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=rf"dropout={dropout}"):
            lora.add_lora(model, TARGETS, r=2, alpha=4, dropout=dropout)
    with pytest.raises(ValueError, match=r"'qproj' matches no nn\.Linear.*'down_proj'.*'lm_head'.*'q_proj'"):
        lora.add_lora(model, ("qproj", "v_proj"), r=2, alpha=4)
    with pytest.raises(ValueError, match=r"'proj' matches no nn\.Linear"):  # a whole part of the name, not a suffix
        lora.add_lora(model, "proj", r=2, alpha=4)
    with pytest.raises(ValueError, match=r"'self_attn' matches no nn\.Linear"):  # a module, but not a Linear
        lora.add_lora(model, "self_attn", r=2, alpha=4)
    for module in (nn.Embedding(10, 4), nn.Conv1d(4, 4, 1)):
        with pytest.raises(TypeError, match=type(module).__name__):
            lora.LoRALinear(module, r=1, alpha=1)
    lora.add_lora(model, "q_proj", r=2, alpha=4)
    with pytest.raises(ValueError, match=r"already has LoRA layers \(model\.layers\.0\.self_attn\.q_proj"):
        lora.add_lora(model, "v_proj", r=2, alpha=4)
