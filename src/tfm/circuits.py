"""Reading a small attention model's circuits from its weights, and testing them by intervention (Elhage et al., 2021).

The book's row convention: a head's attention score between a query token x_q and a key token x_k is
x_q W_Q W_Kᵀ x_kᵀ = x_q W_QK x_kᵀ with **W_QK = W_Q W_Kᵀ** (d_model × d_model), and what the head adds to the residual
stream from a token it attends to is x W_V W_O = x **W_OV** (d_model × d_model). Norms between layers are left out of
these products (their gains rescale, they do not mix the directions), as Elhage et al. do.

- :func:`ov_copying_scores`: a head *copies* when the full OV circuit through the embeddings, W_E W_OV W_U (vocabulary
  × vocabulary: how attending to token a raises the logit of token b), raises the logit of the token attended to.
  Its eigenvalues then are mostly positive; the score Σλ / Σ|λ| lies in [-1, 1], near 1 for a copying head and near
  0 for a random matrix.
- :func:`composition_scores`: how much a later head's queries, keys or values read what an earlier head wrote:
  ||M||_F / (||A||_F ||B||_F), with M = W_QK^{later} W_OV^{earlier}ᵀ for K-composition (the keys read it),
  W_OV^{earlier} W_QK^{later} for Q-composition and W_OV^{earlier} W_OV^{later} for V-composition. Random matrices
  give a small positive score too: compare with the same model at initialisation.
- :func:`path_removed`: an intervention. Within the block, one input of a later layer's attention (its keys, its
  queries or its values) is computed from the residual stream *without* an earlier layer's attention output, while
  everything else sees the stream as it is. If copying stops when only the keys lose layer 0's output, the keys are
  where the two layers compose.

For :class:`tfm.modern.ModernLM` (separate q_proj, k_proj, v_proj, o_proj; RMSNorm before attention) and
:class:`tfm.CausalLM` (one fused in_proj, out_proj) alike, for the weights; :func:`path_removed` needs ModernLM.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from .incontext import attention_layers


def head_matrices(attention: nn.Module) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One layer's W_Q, W_K, W_V ``(h, d_model, d_k)`` and W_O ``(h, d_k, d_model)``, in the row convention
    (``x @ W_Q[i]`` is head i's queries); float64, on the CPU."""
    h, d_k = attention.n_heads, attention.d_k
    if hasattr(attention, "q_proj"):
        if getattr(attention, "n_kv_heads", h) != h:
            raise ValueError("grouped-query attention: the K and V heads are shared; expand them first")
        w_q, w_k, w_v = (p.weight.detach().double().cpu().T for p in (attention.q_proj, attention.k_proj,
                                                                       attention.v_proj))  # (d_model, h d_k)
        w_o = attention.o_proj.weight.detach().double().cpu().T  # (h d_k, d_model)
    else:
        d = attention.d_model
        w_in = attention.in_proj.weight.detach().double().cpu().T  # (d_model, 3 d_model): [W_Q | W_K | W_V]
        w_q, w_k, w_v = w_in[:, :d], w_in[:, d:2 * d], w_in[:, 2 * d:]
        w_o = attention.out_proj.weight.detach().double().cpu().T  # (d_model, d_model)
    d_model = w_q.shape[0]

    def by_head(w: Tensor) -> Tensor:
        return w.reshape(d_model, h, d_k).permute(1, 0, 2)  # (h, d_model, d_k)

    return by_head(w_q), by_head(w_k), by_head(w_v), w_o.reshape(h, d_k, d_model)  # W_O: (h, d_k, d_model)


def qk_ov(attention: nn.Module) -> tuple[Tensor, Tensor]:
    """Each head's W_QK = W_Q W_Kᵀ and W_OV = W_V W_O: ``(h, d_model, d_model)`` each."""
    w_q, w_k, w_v, w_o = head_matrices(attention)
    return w_q @ w_k.transpose(1, 2), w_v @ w_o


def _embeddings(model: nn.Module) -> tuple[Tensor, Tensor]:
    """W_E ``(n_vocab, d_model)`` and W_U ``(d_model, n_vocab)`` of a tfm decoder-only model."""
    if hasattr(model, "embed_tokens"):  # ModernLM
        embed, unembed = model.embed_tokens.weight, model.lm_head.weight
    else:  # CausalLM
        embed, unembed = model.embed.weight, model.generator.weight
    return embed.detach().double().cpu(), unembed.detach().double().cpu().T


def ov_copying_scores(model: nn.Module) -> Tensor:
    """Per layer and head, Σλ / Σ|λ| over the eigenvalues λ of the full OV circuit W_E W_OV W_U: ``(n_layers, h)``."""
    w_e, w_u = _embeddings(model)
    scores = []
    for attention in attention_layers(model):
        _, w_ov = qk_ov(attention)  # (h, d, d)
        circuit = w_e @ w_ov @ w_u  # (h, V, V)
        eigenvalues = torch.linalg.eigvals(circuit)  # (h, V), complex
        total = eigenvalues.abs().sum(-1)  # (h,)
        scores.append(torch.where(total > 0, eigenvalues.real.sum(-1) / total.clamp(min=1e-300), 0.0))  # (h,)
    return torch.stack(scores).float()  # (n_layers, h)


def composition_scores(model: nn.Module, later: int, earlier: int, kind: str = "K") -> Tensor:
    """How much each head of layer ``later`` composes with each head of layer ``earlier`` by its queries ("Q"), keys
    ("K") or values ("V"): ``(h_later, h_earlier)`` (module docstring)."""
    layers = attention_layers(model)
    if not 0 <= earlier < later < len(layers):
        raise ValueError(f"need 0 <= earlier < later < {len(layers)} layers, got earlier={earlier}, later={later}")
    if kind not in ("Q", "K", "V"):
        raise ValueError(f"kind must be 'Q', 'K' or 'V', got {kind!r}")
    qk_late, ov_late = qk_ov(layers[later])  # (h, d, d) each
    _, ov_early = qk_ov(layers[earlier])
    left = {"K": qk_late, "Q": qk_late, "V": ov_late}[kind]
    scores = torch.empty(len(left), len(ov_early), dtype=torch.float64)
    for i, a in enumerate(left):
        for j, b in enumerate(ov_early):
            m = a @ b.T if kind == "K" else b @ a  # K: W_QK W_OVᵀ; Q: W_OV W_QK; V: W_OV^early W_OV^late
            norms = torch.linalg.matrix_norm(a) * torch.linalg.matrix_norm(b)
            scores[i, j] = torch.linalg.matrix_norm(m) / norms if norms > 0 else 0.0  # a silent head composes not
    return scores.float()


@contextmanager
def path_removed(model: nn.Module, source: int, target: int, inputs: str = "k") -> Iterator[None]:
    """Within the block, layer ``target``'s attention computes its ``inputs`` ("q", "k" or "v", or several, e.g.
    "qv") from the residual stream without layer ``source``'s attention output; everything else is unchanged. A
    :class:`tfm.modern.ModernLM` only."""
    layers = getattr(model, "layers", None)
    if layers is None or not hasattr(layers[0], "input_layernorm"):
        raise TypeError(f"path_removed needs a tfm.modern.ModernLM, got {type(model).__name__}")
    if not 0 <= source < target < len(layers):
        raise ValueError(f"need 0 <= source < target < {len(layers)} layers, got source={source}, target={target}")
    if not inputs or set(inputs) - set("qkv"):
        raise ValueError(f"inputs must be made of 'q', 'k' and 'v', got {inputs!r}")
    seen: dict[str, Tensor] = {}
    handles = [
        layers[source].self_attn.register_forward_hook(lambda m, a, out: seen.__setitem__("written", out[0])),
        layers[target].register_forward_pre_hook(lambda m, args: seen.__setitem__("stream", args[0])),
    ]
    block = layers[target]

    def without_source(module, args):
        return (block.input_layernorm(seen["stream"] - seen["written"]),)

    attention = block.self_attn
    for name in inputs:
        handles.append(getattr(attention, f"{name}_proj").register_forward_pre_hook(without_source))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
