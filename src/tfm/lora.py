"""Low-rank adaptation, LoRA (Hu et al., 2021): fine-tune a frozen model by training a small correction beside some of
its weight matrices, and fold the correction into them when training is done.

A linear layer computes y = x Wᵀ + b, with W ∈ ℝ^{d_out×d_in} stored as ``nn.Linear`` stores it (tokens are rows, so
the book's right-hand matrix is Wᵀ). LoRA keeps W frozen and adds a product of two thin matrices,
A ∈ ℝ^{r×d_in} and B ∈ ℝ^{d_out×r}:

    y = x Wᵀ + b + (dropout(x) Aᵀ Bᵀ) · α / r,

which is the layer with weight W + ΔW, ΔW = (α / r) B A, a matrix of rank at most r. It trains r (d_in + d_out)
numbers instead of d_in d_out: for a 4096 × 4096 projection at r = 8, 65,536 instead of 16,777,216. B starts at
zero, so the adapted model starts as the base model exactly; A starts as ``nn.Linear``'s own default (Kaiming-uniform
with a = √5, i.e. uniform in ±1/√d_in), as in PEFT and Microsoft's loralib (the paper says Gaussian). The factor α/r
lets r change without retuning the learning rate; rank-stabilised LoRA (Kalajdzievski, 2023) uses α/√r instead.

Names follow Hugging Face's PEFT (``base_layer``, ``lora_A``, ``lora_B``, ``scaling``, target names matched like its
``target_modules``), so that weights map one to one between the two; the tests check that both give the same logits,
gradients, trainable parameters and merged weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _check(r: int, alpha: float, dropout: float, name: str = "", d_in: int = 0, d_out: int = 0) -> None:
    """Raise for a rank, scale or dropout rate that LoRA cannot use (and, given the widths, a rank above them)."""
    if isinstance(r, bool) or not isinstance(r, int):
        raise TypeError(f"r (the rank) must be an int, got {r!r}")
    if r <= 0:
        raise ValueError(f"r (the rank) must be positive, got r={r}")
    if d_in and r > min(d_in, d_out):
        widest = min(d_in, d_out)
        raise ValueError(f"r={r} is larger than {name or 'the layer'}'s widths allow (d_in={d_in}, d_out={d_out}): "
                         f"B A has rank at most min(d_in, d_out)={widest}, so r must be 1..{widest}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
        raise ValueError(f"alpha must be a positive number, got alpha={alpha!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got dropout={dropout!r}")


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank correction: ``base_layer(x) + (dropout(x) Aᵀ Bᵀ) · scaling``.

    ``scaling`` is alpha / r, or alpha / √r with ``use_rslora``. ``name`` only serves error messages (``add_lora``
    passes the layer's qualified name). A and B are created on the base weight's device, in its dtype."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0, use_rslora: bool = False,
                 name: str = ""):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}"
                            + (f" ({name})" if name else ""))
        d_out, d_in = base.weight.shape
        _check(r, alpha, dropout, name, d_in, d_out)
        self.base_layer = base.requires_grad_(False)
        self.r, self.alpha, self.use_rslora = r, alpha, use_rslora
        self.scaling = alpha / math.sqrt(r) if use_rslora else alpha / r
        like = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_A = nn.Parameter(torch.empty(r, d_in, **like))  # (r, d_in)
        self.lora_B = nn.Parameter(torch.zeros(d_out, r, **like))  # (d_out, r): zero, so the layer starts as the base
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # nn.Linear's default: uniform in ±1/√d_in
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        down = F.linear(self.lora_dropout(x), self.lora_A)  # (B, T, r): x Aᵀ, each token squeezed to r numbers
        up = F.linear(down, self.lora_B)  # (B, T, d_out): x Aᵀ Bᵀ
        return self.base_layer(x) + up * self.scaling  # (B, T, d_out)

    def delta_weight(self) -> Tensor:
        """ΔW = B A · scaling, shaped like the base weight: the change LoRA makes to it."""
        return (self.lora_B @ self.lora_A) * self.scaling  # (d_out, d_in)

    def merge(self) -> nn.Linear:
        """A plain ``nn.Linear`` with weight W + ΔW and the base's bias: the same function without the extra matrix
        products (up to the rounding of one addition). Its parameters keep the base's requires_grad (frozen)."""
        base = self.base_layer
        d_out, d_in = base.weight.shape
        merged = nn.Linear(d_in, d_out, bias=base.bias is not None, device=base.weight.device,
                           dtype=base.weight.dtype)
        with torch.no_grad():
            merged.weight.copy_(base.weight + self.delta_weight())  # (d_out, d_in)
            if base.bias is not None:
                merged.bias.copy_(base.bias)
        return merged.requires_grad_(base.weight.requires_grad)

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha}, scaling={self.scaling:g}"


def _matches(name: str, target: str) -> bool:
    """PEFT's rule for a list of target names: the whole qualified name, or its end after a dot."""
    return name == target or name.endswith("." + target)


def add_lora(model: nn.Module, targets: str | Iterable[str], r: int, alpha: float, dropout: float = 0.0,
             use_rslora: bool = False) -> nn.Module:
    """Replace every ``nn.Linear`` whose qualified name ends with one of ``targets`` by a :class:`LoRALinear`, freeze
    every other parameter, and return the model (changed in place).

    A target matches a whole part of the name, not any suffix: ``"q_proj"`` and ``"self_attn.q_proj"`` both match
    ``layers.0.self_attn.q_proj``; ``"proj"`` matches nothing there. Every target must match at least one Linear
    (PEFT skips a misspelt one silently when another matches, and reads a lone string as a regular expression)."""
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise ValueError(f"targets must be non-empty names of Linear layers, got {targets!r}")
    adapted = [name for name, module in model.named_modules() if isinstance(module, LoRALinear)]
    if adapted:
        raise ValueError(f"the model already has LoRA layers ({adapted[0]}, ...): merge_lora(model) first")
    linears = {name: module for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    for target in targets:
        if not any(_matches(name, target) for name in linears):
            ends = sorted({name.rsplit(".", 1)[-1] for name in linears})  # what one would pass as targets
            raise ValueError(f"target {target!r} matches no nn.Linear in this model; the Linear layers it has are "
                             f"named (last part of the name) {ends}")
    chosen = [name for name in linears if any(_matches(name, t) for t in targets)]
    for name in chosen:  # check every layer before changing any: an error leaves the model as it was
        d_out, d_in = linears[name].weight.shape
        _check(r, alpha, dropout, name, d_in, d_out)
    model.requires_grad_(False)
    for name in chosen:
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent), child, LoRALinear(linears[name], r, alpha, dropout, use_rslora, name))
    return model


def merge_lora(model: nn.Module) -> nn.Module:
    """Replace every :class:`LoRALinear` by its merged ``nn.Linear`` (:meth:`LoRALinear.merge`); return the model."""
    if isinstance(model, LoRALinear):
        return model.merge()
    for name in [name for name, module in model.named_modules() if isinstance(module, LoRALinear)]:
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent), child, model.get_submodule(name).merge())
    return model


def trainable_parameters(model: nn.Module) -> int:
    """The number of parameters that will receive gradients (``requires_grad``); a shared tensor counts once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def adam_bytes(model: nn.Module) -> dict[str, int]:
    """Bytes of training state under Adam, counted from each parameter's own dtype, with the keys of chapter 16's
    ``tfm.distributed.ADAM_AUTOCAST_BYTES``: ``"parameters"`` every weight, frozen or not; ``"gradients"`` one
    gradient per trainable weight; ``"optimizer"`` Adam's two moments per trainable weight (``torch.optim.Adam`` keeps
    them in the parameter's dtype; its one-number step count per tensor is left out).

    Call it on the model before :func:`add_lora` for full fine-tuning, after it for LoRA: frozen weights cost their
    own bytes only. A float32 model fully fine-tuned costs ``ADAM_AUTOCAST_BYTES`` (4 + 4 + 8) per parameter.
    Activations are not included."""
    trained = [p for p in model.parameters() if p.requires_grad]
    gradients = sum(p.numel() * p.element_size() for p in trained)
    return {"parameters": sum(p.numel() * p.element_size() for p in model.parameters()),
            "gradients": gradients, "optimizer": 2 * gradients}
