"""Stacks and whole models: the encoder and decoder stacks, the encoder–decoder of Vaswani et al. (2017), an
encoder-only classifier (BERT style) and a decoder-only language model (GPT style)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from .embedding import TokenEmbedding
from .layers import DecoderLayer, EncoderLayer
from .masks import causal_mask, combine_masks
from .positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding

POSITIONAL = {"sinusoidal": SinusoidalPositionalEncoding, "learned": LearnedPositionalEmbedding}


@dataclass
class TransformerConfig:
    """Sizes and choices of a Transformer. The defaults are the paper's base model (Table 3)."""

    src_vocab: int = 37000
    tgt_vocab: int = 37000
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    activation: str = "relu"
    norm_first: bool = False
    final_norm: bool | None = None  # a LayerNorm after each stack; None: only with pre-LN (nn.Transformer: always)
    layer_norm_eps: float = 1e-5
    max_len: int = 512
    positional: str = "sinusoidal"
    share_embeddings: bool = False  # one embedding matrix for source and target (needs one shared vocabulary)
    tie_output: bool = True  # the output projection reuses the target embedding matrix (§3.4)
    pad_id: int = 0
    fast: bool = True

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {sorted(POSITIONAL)}, got {self.positional!r}")
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f"share_embeddings needs one vocabulary, got src_vocab={self.src_vocab}, tgt_vocab={self.tgt_vocab}"
            )
        for name in ("src_vocab", "tgt_vocab", "d_model", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.pad_id < min(self.src_vocab, self.tgt_vocab):
            raise ValueError(f"pad_id={self.pad_id} is not a token of the vocabularies")


class Encoder(nn.Module):
    """``n_layers`` encoder layers, plus a final LayerNorm when ``final_norm`` (default: with pre-LN)."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 activation: str = "relu", norm_first: bool = False, layer_norm_eps: float = 1e-5,
                 final_norm: bool | None = None, fast: bool = True):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, activation, norm_first, layer_norm_eps, fast)
            for _ in range(n_layers)
        )
        use_final_norm = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if use_final_norm else nn.Identity()

    def forward(self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False,
                caches: list | None = None) -> tuple[Tensor, list[Tensor | None]]:
        """``x (B, T, d_model)`` -> ``(x, [weights (B, h, T, S) or None per layer])``."""
        all_weights = []
        for i, layer in enumerate(self.layers):
            x, weights = layer(x, mask, need_weights, None if caches is None else caches[i])
            all_weights.append(weights)
        return self.norm(x), all_weights


class Decoder(nn.Module):
    """``n_layers`` decoder layers, plus a final LayerNorm when ``final_norm`` (default: with pre-LN)."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 activation: str = "relu", norm_first: bool = False, layer_norm_eps: float = 1e-5,
                 final_norm: bool | None = None, fast: bool = True):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, activation, norm_first, layer_norm_eps, fast)
            for _ in range(n_layers)
        )
        use_final_norm = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if use_final_norm else nn.Identity()

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                need_weights: bool = False, caches: list | None = None) -> tuple[Tensor, list]:
        """``x (B, T, d_model)`` -> ``(x, [(self weights, cross weights) per layer])``."""
        all_weights = []
        for i, layer in enumerate(self.layers):
            cache = None if caches is None else caches[i]
            x, weights = layer(x, memory, self_mask, memory_mask, need_weights, cache)
            all_weights.append(weights)
        return self.norm(x), all_weights


class EncoderDecoder(nn.Module):
    """The full Transformer: embeddings and positions, encoder, decoder, and the output projection (generator)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.src_embed = TokenEmbedding(c.src_vocab, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = self.src_embed if c.share_embeddings else TokenEmbedding(c.tgt_vocab, c.d_model, c.pad_id)
        self.positions = POSITIONAL[c.positional](c.d_model, c.max_len, c.dropout)
        stack = dict(d_model=c.d_model, n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout, activation=c.activation,
                     norm_first=c.norm_first, layer_norm_eps=c.layer_norm_eps, final_norm=c.final_norm, fast=c.fast)
        self.encoder = Encoder(c.n_encoder_layers, **stack)
        self.decoder = Decoder(c.n_decoder_layers, **stack)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab)
        _init_weights(self)
        if c.tie_output:
            self.generator.weight = self.tgt_embed.weight

    def new_caches(self) -> list[dict]:
        """One empty key/value cache per decoder layer, for incremental decoding."""
        return [{} for _ in self.decoder.layers]

    def src_key_mask(self, src: Tensor) -> Tensor:
        """(B, S) True at real (non-padding) source tokens."""
        return src != self.config.pad_id

    def encode(self, src: Tensor, need_weights: bool = False) -> tuple[Tensor, list]:
        """Source ids ``(B, S)`` -> memory ``(B, S, d_model)`` and the encoder's attention weights."""
        if src.dim() != 2:
            raise ValueError(f"src must be token ids of shape (B, S), got {tuple(src.shape)}")
        mask = combine_masks(self.src_key_mask(src))  # (B, 1, 1, S)
        return self.encoder(self.positions(self.src_embed(src)), mask, need_weights)

    def decode(self, tgt: Tensor, memory: Tensor, src_key_mask: Tensor, need_weights: bool = False,
               caches: list | None = None, start: int = 0) -> tuple[Tensor, list]:
        """Target ids ``(B, T)`` -> logits ``(B, T, tgt_vocab)`` and the decoder's attention weights.

        With ``caches`` (one dict per layer), ``tgt`` holds only the new tokens, which sit at positions
        ``start .. start + T - 1``; the keys and values of earlier positions come from the caches.
        """
        if tgt.dim() != 2:
            raise ValueError(f"tgt must be token ids of shape (B, T), got {tuple(tgt.shape)}")
        T = tgt.shape[1]
        causal = causal_mask(T, start + T, device=tgt.device)  # (T, start + T)
        tgt_keys = tgt != self.config.pad_id if caches is None else None
        self_mask = combine_masks(tgt_keys, causal)  # (B or 1, 1, T, start + T)
        memory_mask = combine_masks(src_key_mask)  # (B, 1, 1, S)
        x = self.positions(self.tgt_embed(tgt), start)  # (B, T, d_model)
        x, weights = self.decoder(x, memory, self_mask, memory_mask, need_weights, caches)
        return self.generator(x), weights  # (B, T, tgt_vocab)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher forcing: source ids ``(B, S)`` and shifted target ids ``(B, T)`` -> logits ``(B, T, tgt_vocab)``."""
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src has batch size {src.shape[0]} but tgt has {tgt.shape[0]}")
        memory, _ = self.encode(src)
        logits, _ = self.decode(tgt, memory, self.src_key_mask(src))
        return logits


class EncoderClassifier(nn.Module):
    """Encoder-only classifier: embeddings, positions, encoder, then a pooled vector -> class logits.

    ``pooling="cls"`` reads the first token's final state (put a classification token first, as BERT does);
    ``pooling="mean"`` averages the states of the real (non-padding) tokens. ``causal=True`` adds a causal mask to
    every layer (token ``t`` attends to tokens ``0 .. t`` only), which by itself tells a token how many tokens precede
    it, even without position vectors (chapter 5).
    """

    def __init__(self, n_vocab: int, n_classes: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int = 128, dropout: float = 0.1, max_len: int = 128, pad_id: int = 0, pooling: str = "cls",
                 positional: str = "learned", activation: str = "gelu", norm_first: bool = False,
                 causal: bool = False):
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        self.pad_id, self.pooling, self.causal = pad_id, pooling, causal
        self.embed = TokenEmbedding(n_vocab, d_model, padding_idx=pad_id)
        self.positions = POSITIONAL[positional](d_model, max_len, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, activation, norm_first)
        self.head = nn.Linear(d_model, n_classes)
        _init_weights(self)

    def forward(self, ids: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list]:
        """Token ids ``(B, T)`` -> logits ``(B, n_classes)`` (and the attention weights if asked)."""
        keys = ids != self.pad_id  # (B, T)
        causal = causal_mask(ids.shape[-1], device=ids.device) if self.causal else None  # (T, T) or None
        x, weights = self.encoder(self.positions(self.embed(ids)), combine_masks(keys, causal), need_weights)
        pooled = x[:, 0] if self.pooling == "cls" else mean_pool(x, keys)  # (B, d_model)
        logits = self.head(pooled)  # (B, n_classes)
        return (logits, weights) if need_weights else logits


def mean_pool(x: Tensor, keys: Tensor) -> Tensor:
    """The mean of the states ``x (B, T, d)`` over the real tokens (``keys (B, T)`` True) -> ``(B, d)``."""
    weights = keys.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # (B, d)


class CausalLM(nn.Module):
    """Decoder-only language model (GPT style): pre-LN layers with causal self-attention, no cross-attention.

    ``window=w`` limits every layer's self-attention to the ``w`` most recent positions (a sliding-window mask, see
    :func:`tfm.causal_mask`); ``None`` lets each position see the whole prefix. ``positional`` is "learned" (a
    trained vector added per position, as in GPT), "sinusoidal" (the paper's table) or "rotary" (no table: each
    layer rotates its queries and keys by their positions, :class:`tfm.RotaryEmbedding`, so that attention scores
    depend on relative positions).
    """

    def __init__(self, n_vocab: int, d_model: int = 128, n_heads: int = 4, n_layers: int = 4, d_ff: int = 512,
                 dropout: float = 0.1, max_len: int = 256, positional: str = "learned", activation: str = "gelu",
                 tie_output: bool = True, window: int | None = None):
        super().__init__()
        causal_mask(1, window=window)  # a bad window fails here, not at the first forward pass
        self.n_vocab, self.max_len, self.window = n_vocab, max_len, window
        if positional not in (*POSITIONAL, "rotary"):
            raise ValueError(f"positional must be one of {sorted((*POSITIONAL, 'rotary'))}, got {positional!r}")
        self.embed = TokenEmbedding(n_vocab, d_model, scale=False)
        if positional == "rotary":  # no table: every attention layer rotates its queries and keys (chapter 5)
            self.positions = RotaryPositions(max_len, dropout)
        else:
            self.positions = POSITIONAL[positional](d_model, max_len, dropout)
        self.decoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, activation, norm_first=True)
        if positional == "rotary":
            for layer in self.decoder.layers:
                layer.self_attn.rotary = RotaryEmbedding(d_model // n_heads, max_len)
        self.generator = nn.Linear(d_model, n_vocab, bias=False)
        _init_weights(self)
        if tie_output:
            self.generator.weight = self.embed.weight

    def new_caches(self) -> list[dict]:
        """One empty key/value cache per layer, for incremental decoding (:func:`tfm.generate`)."""
        return [{} for _ in self.decoder.layers]

    def forward(self, ids: Tensor, caches: list | None = None, start: int = 0,
                need_weights: bool = False) -> Tensor | tuple[Tensor, list]:
        """Ids ``(B, T)`` at positions ``start ..`` -> next-token logits ``(B, T, n_vocab)``."""
        T = ids.shape[-1]
        mask = causal_mask(T, start + T, device=ids.device, window=self.window)  # (T, start + T)
        x, weights = self.decoder(self.positions(self.embed(ids), start), mask, need_weights, caches)
        logits = self.generator(x)  # (B, T, n_vocab)
        return (logits, weights) if need_weights else logits


class RotaryPositions(nn.Module):
    """The position stage of a model whose attention layers rotate queries and keys: it adds nothing, checks that the
    positions fit ``max_len`` and applies dropout."""

    def __init__(self, max_len: int, dropout: float = 0.0):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        if start < 0 or start + x.shape[-2] > self.max_len:
            raise ValueError(f"positions {start}..{start + x.shape[-2] - 1} do not fit the rotary embedding of "
                             f"max_len={self.max_len}: build the model with a larger max_len")
        return self.dropout(x)


def _init_weights(model: nn.Module) -> None:
    """Xavier-uniform for every matrix, as in common Transformer implementations; biases and norms untouched."""
    for name, p in model.named_parameters():
        if p.dim() > 1 and "norm" not in name:
            nn.init.xavier_uniform_(p)


def count_parameters(model: nn.Module) -> int:
    """Number of distinct trainable parameters (a tied matrix counts once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)

