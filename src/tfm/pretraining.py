"""Masked-language-model pretraining (Devlin et al., 2019) and the move from a pretrained encoder to a classifier.

BERT's objective: choose 15% of the real tokens of each sequence; of those, replace 80% by ``[MASK]``, 10% by a random
token and leave 10% unchanged; the model predicts the original token at every chosen position, and only there.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .data import pad
from .device import generator
from .embedding import TokenEmbedding
from .interop import BertEncoder
from .masks import combine_masks
from .model import POSITIONAL, Encoder, EncoderClassifier, _init_weights, mean_pool
from .training import train

IGNORE = -100  # the target of a position the loss skips (F.cross_entropy's default ignore_index)


def mask_tokens(ids: Tensor, mask_id: int, first_normal_id: int, n_vocab: int, rate: float = 0.15,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """BERT's 80/10/10 masking of token ids ``(B, T)``.

    Only ids ``>= first_normal_id`` may be chosen (special tokens such as ``[PAD]``, ``[CLS]``, ``[MASK]`` have the
    smaller ids), and a random replacement is drawn from them too. Returns ``(inputs, targets)``, both ``(B, T)``:
    ``targets`` holds the original id at each chosen position and :data:`IGNORE` elsewhere.
    """
    if ids.dim() != 2 or ids.dtype != torch.long:
        raise ValueError(f"ids must be a (B, T) tensor of torch.long, got shape {tuple(ids.shape)} and {ids.dtype}")
    if not 0.0 < rate < 1.0:
        raise ValueError(f"rate must lie in (0, 1), got {rate}")
    if not 0 <= mask_id < first_normal_id < n_vocab:
        raise ValueError(f"need 0 <= mask_id < first_normal_id < n_vocab, got {mask_id}, {first_normal_id}, {n_vocab}")
    if int(ids.max()) >= n_vocab:
        raise ValueError(f"ids must lie below n_vocab={n_vocab}, found {int(ids.max())}")
    device = ids.device
    draw = torch.rand(ids.shape, generator=generator, device="cpu").to(device)  # (B, T) in [0, 1)
    chosen = (draw < rate) & (ids >= first_normal_id)  # (B, T)
    kind = torch.rand(ids.shape, generator=generator, device="cpu").to(device)  # 80% mask, 10% random, 10% keep
    random_ids = torch.randint(first_normal_id, n_vocab, ids.shape, generator=generator, device="cpu").to(device)
    inputs = torch.where(chosen & (kind < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)
    targets = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    return inputs, targets


class MaskedLM(nn.Module):
    """An encoder with BERT's masked-language-model head: a dense layer, GELU and LayerNorm, then an output layer
    tied to the token embedding. Its ``embed``, ``positions`` and ``encoder`` have the names and shapes of an
    :class:`tfm.EncoderClassifier` of the same sizes, so :func:`classifier_from` can hand them on."""

    def __init__(self, n_vocab: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2, d_ff: int = 128,
                 dropout: float = 0.1, max_len: int = 128, pad_id: int = 0, positional: str = "learned",
                 activation: str = "gelu", norm_first: bool = False):
        super().__init__()
        self.sizes = dict(n_vocab=n_vocab, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff,
                          dropout=dropout, max_len=max_len, pad_id=pad_id, positional=positional,
                          activation=activation, norm_first=norm_first)
        self.pad_id = pad_id
        self.embed = TokenEmbedding(n_vocab, d_model, padding_idx=pad_id)
        self.positions = POSITIONAL[positional](d_model, max_len, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, activation, norm_first)
        self.transform = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.LayerNorm(d_model))
        self.bias = nn.Parameter(torch.zeros(n_vocab))
        _init_weights(self)

    def encode(self, ids: Tensor) -> Tensor:
        """Token ids ``(B, T)`` -> the encoder's output states ``(B, T, d_model)``."""
        keys = ids != self.pad_id  # (B, T)
        x, _ = self.encoder(self.positions(self.embed(ids)), combine_masks(keys))
        return x

    def predict(self, states: Tensor) -> Tensor:
        """Encoder states ``(..., d_model)`` -> logits ``(..., n_vocab)`` over the original token."""
        return F.linear(self.transform(states), self.embed.weight, self.bias)

    def forward(self, ids: Tensor) -> Tensor:
        """Token ids ``(B, T)`` -> logits ``(B, T, n_vocab)`` for the original token at every position."""
        return self.predict(self.encode(ids))

    def loss(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy over the chosen positions (``targets != IGNORE``); the output layer runs only there."""
        if inputs.shape != targets.shape:
            raise ValueError(f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} must have one shape")
        chosen = targets != IGNORE  # (B, T)
        if not chosen.any():
            raise ValueError("no position is chosen (every target is IGNORE): nothing to predict")
        logits = self.predict(self.encode(inputs)[chosen])  # (N chosen, n_vocab)
        return F.cross_entropy(logits, targets[chosen])


def classifier_from(mlm: MaskedLM | None, n_classes: int, pooling: str = "cls", **sizes) -> EncoderClassifier:
    """An :class:`tfm.EncoderClassifier` whose embedding, positions and encoder are copies of ``mlm``'s (a new,
    randomly initialised head on top). With ``mlm=None`` the same classifier is built from scratch with ``sizes``."""
    if mlm is not None:
        if sizes:
            raise ValueError(f"sizes come from the pretrained model; do not pass {sorted(sizes)}")
        sizes = mlm.sizes
    classifier = EncoderClassifier(n_classes=n_classes, pooling=pooling, **sizes)
    if mlm is not None:
        body = {k: v for k, v in mlm.state_dict().items() if k.split(".")[0] in ("embed", "positions", "encoder")}
        missing, unexpected = classifier.load_state_dict(body, strict=False)
        if unexpected or any(not k.startswith("head.") for k in missing):
            raise RuntimeError(f"the encoder did not transfer: missing {missing}, unexpected {unexpected}")
    return classifier


def windows(ids: list[int], length: int, cls_id: int, min_length: int = 8) -> list[list[int]]:
    """Cut one paragraph's token ids into pieces of at most ``length - 1`` tokens, each behind ``cls_id``; a last
    piece shorter than ``min_length`` is dropped."""
    if length < 2 or min_length < 1:
        raise ValueError(f"need length >= 2 and min_length >= 1, got length={length}, min_length={min_length}")
    pieces = [ids[i: i + length - 1] for i in range(0, len(ids), length - 1)]
    return [[cls_id] + piece for piece in pieces if len(piece) >= min_length]


def pretrain_mlm(model: MaskedLM, sequences: list[list[int]], steps: int, mask_id: int, first_normal_id: int,
                 batch_size: int = 64, lr: float = 2e-3, warmup: int = 50, seed: int = 0,
                 held_out: list[list[int]] | None = None, eval_every: int = 50) -> dict[str, list[float]]:
    """Masked-language-model training: batches of ``batch_size`` sequences drawn at random (``seed``), masked afresh
    by :func:`mask_tokens` at every step, AdamW (weight decay 0.01) with a linear warm-up over ``warmup`` steps and a
    linear decay to 0. With ``held_out`` sequences, their loss under one fixed masking is recorded every
    ``eval_every`` steps. Returns :func:`tfm.train`'s history; the model ends in eval mode."""
    if not sequences:
        raise ValueError("no sequences to pretrain on")
    pad_id, n_vocab = model.pad_id, model.sizes["n_vocab"]
    draw = generator(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, 1.0 - step / steps))
    device = next(model.parameters()).device

    def next_batch() -> tuple[Tensor, Tensor]:
        rows = torch.randint(len(sequences), (batch_size,), generator=draw).tolist()
        ids = pad([sequences[i] for i in rows], pad_id)  # (B, T)
        return tuple(t.to(device) for t in mask_tokens(ids, mask_id, first_normal_id, n_vocab, generator=draw))

    evaluate = None
    if held_out:
        fixed = mask_tokens(pad(held_out, pad_id), mask_id, first_normal_id, n_vocab,
                            generator=generator(12345))
        fixed = tuple(t.to(device) for t in fixed)

        def evaluate(model: MaskedLM) -> float:
            return model.loss(*fixed).item()

    return train(model, next_batch, lambda m, batch: m.loss(*batch), optimizer, steps, scheduler=scheduler,
                 clip_norm=1.0, evaluate=evaluate, eval_every=eval_every)


def fine_tune(model: nn.Module, inputs: tuple[Tensor, ...], labels: Tensor, steps: int, lr: float = 5e-4,
              batch_size: int = 32, seed: int = 0, parameters=None) -> dict[str, list[float]]:
    """Train a classifier ``model(*inputs[rows]) -> logits (B, n_classes)`` on ``labels (N,)`` with cross-entropy,
    AdamW (weight decay 0.01) at a constant ``lr``, batches drawn at random (``seed``). ``parameters`` (default: all
    of the model's) are the ones trained. The model ends in eval mode."""
    n = labels.shape[0]
    if any(t.shape[0] != n for t in inputs):
        raise ValueError(f"every input needs {n} rows, one per label, got {[tuple(t.shape) for t in inputs]}")
    draw = generator(seed)
    optimizer = torch.optim.AdamW(model.parameters() if parameters is None else parameters, lr=lr, weight_decay=0.01)

    def next_batch() -> Tensor:
        return torch.randint(n, (min(batch_size, n),), generator=draw).to(labels.device)

    def loss_step(model: nn.Module, rows: Tensor) -> Tensor:
        return F.cross_entropy(model(*(t[rows] for t in inputs)), labels[rows])

    return train(model, next_batch, loss_step, optimizer, steps, clip_norm=1.0)


@torch.no_grad()
def accuracy(model: nn.Module, inputs: tuple[Tensor, ...], labels: Tensor, batch_size: int = 256) -> float:
    """The fraction of ``labels`` that ``model(*inputs)`` predicts (argmax of the logits), in eval mode."""
    model.eval()
    right = 0
    for start in range(0, labels.shape[0], batch_size):
        logits = model(*(t[start: start + batch_size] for t in inputs))  # (B, n_classes)
        right += int((logits.argmax(-1) == labels[start: start + batch_size]).sum())
    return right / labels.shape[0]


class TopLayersClassifier(nn.Module):
    """A pretrained BERT (:class:`tfm.interop.BertEncoder`) cut in two for cheap fine-tuning: :meth:`bottom` runs the
    embeddings and all but the top ``n_top`` layers, frozen (compute it once per sentence); ``forward`` runs copies of
    the top layers, which are trained, and a new linear head on the mean of the real tokens' final states."""

    def __init__(self, bert: BertEncoder, n_top: int, n_classes: int):
        super().__init__()
        n_layers = len(bert.encoder.layers)
        if not 1 <= n_top <= n_layers:
            raise ValueError(f"n_top must lie in 1..{n_layers} (the model's layers), got {n_top}")
        self.bert, self.n_bottom = bert, n_layers - n_top
        self.top = nn.ModuleList(copy.deepcopy(layer) for layer in bert.encoder.layers[self.n_bottom:])
        self.head = nn.Linear(bert.embeddings.word.embedding_dim, n_classes)
        self.bert.requires_grad_(False)
        self.top.requires_grad_(True)  # the copies train even when ``bert`` was frozen by an earlier classifier

    @torch.no_grad()
    def bottom(self, ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Token ids and Hugging Face's attention mask ``(B, T)`` -> frozen states ``(B, T, d_model)``."""
        self.bert.eval()
        x = self.bert.embeddings(ids)  # (B, T, d_model)
        mask = combine_masks(attention_mask.bool())  # (B, 1, 1, T)
        for layer in self.bert.encoder.layers[: self.n_bottom]:
            x, _ = layer(x, mask)
        return x

    def forward(self, states: Tensor, attention_mask: Tensor) -> Tensor:
        """States from :meth:`bottom` ``(B, T, d_model)`` -> logits ``(B, n_classes)``."""
        keys = attention_mask.bool()  # (B, T)
        x, mask = states, combine_masks(keys)
        for layer in self.top:
            x, _ = layer(x, mask)
        return self.head(mean_pool(x, keys))  # (B, n_classes)
