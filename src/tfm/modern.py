"""Today's decoder block, as in Llama 2 and 3, Mistral and Qwen: RMSNorm, a gated feed-forward layer (SwiGLU), rotary
positions applied to queries and keys inside attention, grouped-query attention, no biases, pre-norm with a final norm.

Submodule names follow Hugging Face's ``LlamaForCausalLM`` (``q_proj``, ``gate_proj``, ``input_layernorm``, ...), so
that weights map one to one (:func:`from_llama`). Chapter 15 builds each piece by hand first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import attention, fast_attention
from .masks import causal_mask
from .multihead import KVCache
from .positional import RotaryEmbedding


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) · g: LayerNorm without the mean subtraction and without a bias (Zhang & Sennrich, 2019).

    Computed in float32 whatever the input's dtype, as Llama does, then cast back before the gain."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        if d_model < 1:
            raise ValueError(f"d_model must be positive, got {d_model}")
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # the gain g

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(f"x has width {x.shape[-1]} but the norm was built for d_model={self.weight.shape[0]}")
        x32 = x.float()
        inverse_rms = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return self.weight * (x32 * inverse_rms).to(x.dtype)  # (..., d_model)


class SwiGLU(nn.Module):
    """FFN(x) = (SiLU(x W_gate) ⊙ x W_up) W_down (Shazeer, 2020): a feed-forward layer whose hidden units are gated.

    Three matrices instead of two: at ``d_ff = 2/3 · 4 · d_model`` it has the parameters of a 2017 FFN of width
    4 · d_model (:func:`swiglu_width`)."""

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        if d_model < 1 or d_ff < 1:
            raise ValueError(f"d_model and d_ff must be positive, got {d_model} and {d_ff}")
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (B, T, d_ff)
        return self.down_proj(hidden)  # (B, T, d_model)


def swiglu_width(d_model: int, d_ff: int | None = None, multiple_of: int = 1) -> int:
    """The SwiGLU width with the parameters of a 2017 FFN of width ``d_ff`` (default 4 · d_model): 2/3 · d_ff, rounded
    up to a multiple of ``multiple_of`` (Llama rounds to 256).

    2/3 · d_ff is first rounded to the nearest integer, which keeps the parameter count closest to the FFN's; Meta's
    Llama code truncates it (``int``) instead. The two differ by one at ``multiple_of=1`` when the fraction is 2/3
    (d_ff = 256: 171 here, 170 there), and agree once rounded up to 256 at Llama's widths (4096: 11008, 5120:
    13824)."""
    d_ff = 4 * d_model if d_ff is None else d_ff
    width = round(2 * d_ff / 3)
    return multiple_of * -(-width // multiple_of)


class GroupedQueryAttention(nn.Module):
    """``n_heads`` query heads that share ``n_kv_heads`` key/value heads (Ainslie et al., 2023), with rotary positions.

    Query head i reads key/value head ``i // (n_heads // n_kv_heads)``. ``n_kv_heads = n_heads`` is ordinary multi-head
    attention; ``n_kv_heads = 1`` is multi-query attention (Shazeer, 2019). The cache keeps the ``n_kv_heads`` heads
    only: that, not compute, is what grouping saves.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, max_len: int = 2048,
                 rope_base: float = 10000.0, rope_layout: str = "half", bias: bool = False, fast: bool = True):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model < 1 or n_heads < 1 or n_kv_heads < 1:
            raise ValueError(f"d_model, n_heads and n_kv_heads must be positive, got {d_model}, {n_heads}, "
                             f"{n_kv_heads}")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}: each key/value head serves "
                             "a whole group of query heads")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k, self.group, self.fast = d_model // n_heads, n_heads // n_kv_heads, fast
        self.q_proj = nn.Linear(d_model, n_heads * self.d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.o_proj = nn.Linear(n_heads * self.d_k, d_model, bias=bias)
        self.rope = RotaryEmbedding(self.d_k, max_len, rope_base, rope_layout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None, start: int = 0,
                need_weights: bool = False, positions: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``x (B, T, d_model)`` at positions ``start ..`` (or ``positions (B, T)``) -> ``(out (B, T, d_model), weights
        (B, h, T, S) | None)``."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)  # (B, h_kv, T, d_k)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)  # (B, h_kv, T, d_k)
        turn = (lambda t: self.rope(t, start)) if positions is None else (lambda t: self.rope(t, start, positions))
        q, k = turn(q), turn(k)  # positions enter the scores only (a stand-in rope may take (x, start) alone)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)  # (B, h_kv, S, d_k)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        k = k.repeat_interleave(self.group, dim=1)  # (B, h, S, d_k): each key/value head serves its group
        v = v.repeat_interleave(self.group, dim=1)  # (B, h, S, d_k)
        if need_weights or not self.fast:
            z, weights = attention(q, k, v, mask=mask)  # (B, h, T, d_k), (B, h, T, S)
        else:
            z, weights = fast_attention(q, k, v, mask=mask)
        return self.o_proj(z.transpose(1, 2).reshape(B, T, self.d_model)), weights  # (B, T, d_model)


class ModernBlock(nn.Module):
    """x + Attention(RMSNorm(x)), then h + SwiGLU(RMSNorm(h)): pre-norm, no biases, no dropout."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, max_len: int = 2048,
                 rope_base: float = 10000.0, eps: float = 1e-6, rope_layout: str = "half"):
        super().__init__()
        self.input_layernorm = RMSNorm(d_model, eps)
        self.self_attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, max_len, rope_base, rope_layout)
        self.post_attention_layernorm = RMSNorm(d_model, eps)
        self.mlp = SwiGLU(d_model, d_ff)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None, start: int = 0,
                need_weights: bool = False, positions: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        attended, weights = self.self_attn(self.input_layernorm(x), mask, cache, start, need_weights, positions)
        h = x + attended  # (B, T, d_model)
        return h + self.mlp(self.post_attention_layernorm(h)), weights  # (B, T, d_model)


@dataclass
class ModernConfig:
    """The sizes of a :class:`ModernLM` (the fields of Hugging Face's ``LlamaConfig`` that matter here)."""

    n_vocab: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int | None = None  # default: swiglu_width(d_model)
    max_len: int = 256
    rope_base: float = 10000.0
    eps: float = 1e-6
    tie_output: bool = False
    rope_layout: str = "half"

    def __post_init__(self) -> None:
        if self.d_ff is None:
            self.d_ff = swiglu_width(self.d_model)
        for name in ("n_vocab", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


class ModernLM(nn.Module):
    """A Llama-style decoder-only language model: embeddings, ``n_layers`` :class:`ModernBlock` s, a final RMSNorm and
    an output layer (untied by default, as in Llama 2). No position table: positions enter through the rotary
    embedding inside each attention layer. Works with :func:`tfm.generate`."""

    def __init__(self, config: ModernConfig):
        super().__init__()
        c = config
        self.config, self.n_vocab, self.max_len = c, c.n_vocab, c.max_len
        self.embed_tokens = nn.Embedding(c.n_vocab, c.d_model)
        self.layers = nn.ModuleList(ModernBlock(c.d_model, c.n_heads, c.n_kv_heads, c.d_ff, c.max_len, c.rope_base,
                                                c.eps, c.rope_layout) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.d_model, c.eps)
        self.lm_head = nn.Linear(c.d_model, c.n_vocab, bias=False)
        for p in self.parameters():  # Llama's initialisation: normal(0, 0.02) for every matrix
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
        if c.tie_output:
            self.lm_head.weight = self.embed_tokens.weight

    def new_caches(self) -> list[KVCache]:
        """One empty key/value cache per layer, for incremental decoding."""
        return [{} for _ in self.layers]

    def forward(self, ids: Tensor, caches: list | None = None, start: int = 0, need_weights: bool = False,
                mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor | tuple[Tensor, list]:
        """Ids ``(B, T)`` at positions ``start ..`` -> next-token logits ``(B, T, n_vocab)``.

        ``mask (B, T, start + T)`` (boolean, True = may attend) narrows the causal mask further, and ``positions
        (B, T)`` gives each token its own rotary position: with both, several documents packed into one row do not see
        each other and each starts at position 0 (:mod:`tfm.chat`). Without them the model is as before."""
        if ids.dim() != 2:
            raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
        T = ids.shape[1]
        if start + T > self.max_len:
            raise ValueError(f"positions up to {start + T - 1} exceed the model's max_len={self.max_len}: the context "
                             f"({start} cached + {T} new tokens) is longer than the model was built for")
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"got {len(caches)} caches for {len(self.layers)} layers")
        mask = _narrow(causal_mask(T, start + T, device=ids.device), mask, positions, ids, self.max_len)  # (T, S)
        x, weights = self.embed_tokens(ids), []  # (B, T, d_model)
        for i, layer in enumerate(self.layers):
            cache = None if caches is None else caches[i]
            x, w = layer(x, mask, cache, start, need_weights, positions)  # (B, T, d_model)
            weights.append(w)
        logits = self.lm_head(self.norm(x))  # (B, T, n_vocab)
        return (logits, weights) if need_weights else logits


def _narrow(causal: Tensor, mask: Tensor | None, positions: Tensor | None, ids: Tensor, max_len: int) -> Tensor:
    """The causal mask ``(T, S)``, ANDed with ``mask (B, T, S)`` if given -> ``(B, 1, T, S)``; checks ``positions``."""
    if positions is not None and (positions.shape != ids.shape or positions.dtype.is_floating_point
                                  or int(positions.min()) < 0 or int(positions.max()) >= max_len):
        raise ValueError(f"positions must be integers in [0, max_len={max_len}) of the ids' shape {tuple(ids.shape)}, "
                         f"got shape {tuple(positions.shape)}, dtype {positions.dtype}")
    if mask is None:
        return causal  # (T, S)
    if mask.dtype != torch.bool or mask.shape != (ids.shape[0], *causal.shape):
        raise ValueError(f"mask must be boolean (B, T, S) = {(ids.shape[0], *causal.shape)}, True = may attend; got "
                         f"{mask.dtype} {tuple(mask.shape)}")
    return (causal & mask)[:, None]  # (B, 1, T, S): broadcast over heads


def parameter_count(n_vocab: int, d_model: int, n_layers: int, n_heads: int, n_kv_heads: int, d_ff: int,
                    tie_output: bool = False) -> int:
    """Parameters of a Llama-style model, from its configuration alone (no weights are built)."""
    d_k = d_model // n_heads
    attention_params = d_model * (n_heads * d_k) * 2 + d_model * (n_kv_heads * d_k) * 2  # W_Q, W_O; W_K, W_V
    block = attention_params + 3 * d_model * d_ff + 2 * d_model  # + SwiGLU's three matrices + two RMSNorm gains
    embeddings = n_vocab * d_model * (1 if tie_output else 2)  # input table and output layer
    return n_layers * block + embeddings + d_model  # + the final norm's gain


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, n_tokens: int, batch: int = 1,
                   bytes_per_value: int = 2) -> int:
    """Bytes of a key/value cache: keys and values of every layer and key/value head for every token (bf16 default)."""
    return 2 * n_layers * n_kv_heads * d_head * n_tokens * batch * bytes_per_value


def config_from_llama(config) -> ModernConfig:
    """A :class:`ModernConfig` from Hugging Face's ``LlamaConfig``; raises for a feature this block does not have
    (another model type, such as Mistral's or Qwen2's, included: their configurations carry features a Llama one
    does not, sliding-window attention among them)."""
    model_type = getattr(config, "model_type", "llama")
    if model_type != "llama":
        raise ValueError(f"a {model_type!r} configuration: tfm.modern reads Llama configurations only "
                         "(model_type 'llama')")
    unsupported = {"sliding_window attention": getattr(config, "sliding_window", None) is not None,
                   "attention_bias": bool(getattr(config, "attention_bias", False)),
                   "mlp_bias": bool(getattr(config, "mlp_bias", False)),
                   "hidden_act other than silu": getattr(config, "hidden_act", "silu") != "silu"}
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    unsupported["rope scaling"] = rope.get("rope_type", "default") != "default"
    head_dim = getattr(config, "head_dim", None)
    unsupported["head_dim other than hidden_size / num_attention_heads"] = (
        head_dim is not None and head_dim != config.hidden_size // config.num_attention_heads)
    found = [name for name, present in unsupported.items() if present]
    if found:
        raise ValueError(f"this LlamaConfig uses {', '.join(found)}, which tfm.modern does not implement")
    theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    return ModernConfig(n_vocab=config.vocab_size, d_model=config.hidden_size, n_layers=config.num_hidden_layers,
                        n_heads=config.num_attention_heads, n_kv_heads=config.num_key_value_heads,
                        d_ff=config.intermediate_size, max_len=config.max_position_embeddings, rope_base=theta,
                        eps=config.rms_norm_eps, tie_output=bool(config.tie_word_embeddings), rope_layout="half")


def from_llama(llama: nn.Module) -> ModernLM:
    """A :class:`ModernLM` with the weights of Hugging Face's ``LlamaForCausalLM`` (same names, without "model.")."""
    model = ModernLM(config_from_llama(llama.config))
    state = {name.removeprefix("model."): value for name, value in llama.state_dict().items()}
    model.load_state_dict(state, strict=True)
    first = next(llama.parameters())
    return model.to(device=first.device, dtype=first.dtype)
