"""Masked-language-model pretraining (Devlin et al., 2019) and the move from a pretrained encoder to a classifier.

BERT's objective: choose 15% of the real tokens of each sequence; of those, replace 80% by ``[MASK]``, 10% by a random
token and leave 10% unchanged; the model predicts the original token at every chosen position, and only there.
"""

from __future__ import annotations

import copy
import math

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


KINDS = ("[MASK]", "random", "kept")  # what the model reads at a chosen position


def position_kinds(ids: Tensor, inputs: Tensor, targets: Tensor, mask_id: int) -> dict[str, Tensor]:
    """The chosen positions (``targets != IGNORE``) by what the model reads there, each ``(B, T)`` boolean: ``[MASK]``,
    another ordinary token (``random``) or the original (``kept``, a random draw of the original token included)."""
    if not ids.shape == inputs.shape == targets.shape:
        raise ValueError(f"ids, inputs and targets must have one shape, got "
                         f"{[tuple(t.shape) for t in (ids, inputs, targets)]}")
    chosen = targets != IGNORE  # (B, T)
    masked = chosen & (inputs == mask_id)
    return {"[MASK]": masked, "random": chosen & ~masked & (inputs != ids), "kept": chosen & (inputs == ids)}


def mean_by_kind(losses: Tensor, kinds: dict[str, Tensor]) -> dict[str, float]:
    """The mean of per-position ``losses (B, T)`` over each kind of :func:`position_kinds`, and over all of them
    (``"all"``: the masked-LM loss)."""
    every = torch.stack(list(kinds.values())).any(0)  # (B, T): every chosen position
    return {kind: losses[where].mean().item() for kind, where in kinds.items()} | {"all": losses[every].mean().item()}


@torch.no_grad()
def losses_by_kind(model: MaskedLM, ids: Tensor, inputs: Tensor, targets: Tensor, mask_id: int) -> dict[str, float]:
    """The cross-entropy of ``model`` at the chosen positions, averaged over each kind of :func:`position_kinds`
    and over all (``"all"`` equals ``model.loss(inputs, targets)``). ``ids`` are the sequences before masking."""
    kinds = position_kinds(ids, inputs, targets, mask_id)
    chosen = targets != IGNORE  # (B, T)
    losses = torch.zeros(targets.shape, device=targets.device)  # (B, T), zero where not chosen
    losses[chosen] = F.cross_entropy(model.predict(model.encode(inputs)[chosen]), targets[chosen], reduction="none")
    return mean_by_kind(losses, kinds)


class CountBaselines:
    """Count models of the hidden token, fitted on ``sequences`` (ids below ``first_normal_id`` are special: never
    predicted, never a neighbour). ``unigram``: add-one frequencies u. ``no_context``: at ``[MASK]`` u; at a visible
    token, that token with probability ``copy`` (half of the chosen positions that show one show their own), else u.
    ``bigram``: at ``[MASK]``, p(x | l, r) ∝ p(x | l) p(r | x) from the visible ordinary neighbours, with
    p(b | a) = (c(a b) + k u(b)) / (c(a) + k), k = ``strength``; at a visible token, mixed with the copy rule."""

    def __init__(self, sequences: list[list[int]], n_vocab: int, first_normal_id: int, copy: float = 0.5,
                 strength: float = 1.0):
        if not sequences:
            raise ValueError("no sequences to count")
        if not 0.0 <= copy < 1.0 or strength <= 0:
            raise ValueError(f"need 0 <= copy < 1 and strength > 0, got copy={copy}, strength={strength}")
        self.n_vocab, self.first, self.copy = n_vocab, first_normal_id, copy
        unigram = torch.zeros(n_vocab, dtype=torch.float64)  # (n_vocab,)
        pairs = torch.zeros(n_vocab, n_vocab, dtype=torch.float64)  # (n_vocab, n_vocab): c(a b)
        for seq in sequences:
            t = torch.tensor(seq)
            unigram += torch.bincount(t[t >= first_normal_id], minlength=n_vocab).double()
            both = (t[:-1] >= first_normal_id) & (t[1:] >= first_normal_id)
            pairs.index_put_((t[:-1][both], t[1:][both]), torch.ones(int(both.sum())).double(), accumulate=True)
        unigram[first_normal_id:] += 1.0  # add-one
        self.unigram_probs = unigram / unigram.sum()  # (n_vocab,), zero at the special tokens
        self.next_probs = (pairs + strength * self.unigram_probs) / (pairs.sum(1, keepdim=True) + strength)  # (V, V)

    def _visible(self, probs: Tensor, inputs: Tensor, mask_id: int) -> Tensor:  # the copy rule at visible tokens
        copied = F.one_hot(inputs.clamp(min=0), self.n_vocab).double()  # (N, n_vocab)
        visible = (inputs != mask_id).unsqueeze(-1)  # (N, 1)
        return torch.where(visible, self.copy * copied + (1 - self.copy) * probs, probs)

    def log_probs(self, inputs: Tensor, chosen: Tensor, mask_id: int) -> dict[str, Tensor]:
        """Each model's log-probabilities ``(N, n_vocab)`` at the ``N`` positions where ``chosen (B, T)`` is True."""
        if inputs.shape != chosen.shape or inputs.dim() != 2:
            raise ValueError(f"inputs {tuple(inputs.shape)} and chosen {tuple(chosen.shape)} must be one (B, T) shape")
        inputs, chosen = inputs.cpu(), chosen.cpu()
        rows, cols = chosen.nonzero(as_tuple=True)  # (N,), (N,)
        here = inputs[rows, cols]  # (N,)
        padded = F.pad(inputs, (1, 1), value=mask_id)  # (B, T + 2): an edge reads like [MASK]
        left, right = padded[rows, cols], padded[rows, cols + 2]  # (N,), (N,)
        unigram = self.unigram_probs.expand(len(here), -1)  # (N, n_vocab)
        log_bigram = torch.where((left >= self.first).unsqueeze(-1), self.next_probs[left].log(), unigram.log())
        log_bigram = log_bigram + torch.where((right >= self.first).unsqueeze(-1), self.next_probs[:, right].T.log(),
                                              torch.zeros_like(unigram))  # (N, n_vocab)
        log_bigram[:, : self.first] = -math.inf
        bigram = log_bigram.softmax(-1)  # (N, n_vocab)
        return {"unigram": unigram.log(), "no_context": self._visible(unigram, here, mask_id).log(),
                "bigram": self._visible(bigram, here, mask_id).log()}

    def losses(self, inputs: Tensor, targets: Tensor, mask_id: int) -> dict[str, Tensor]:
        """Each model's cross-entropy at the chosen positions, ``(B, T)`` (zero elsewhere), for :func:`mean_by_kind`."""
        chosen = targets.cpu() != IGNORE  # (B, T)
        result = {}
        for name, log_probs in self.log_probs(inputs, chosen, mask_id).items():
            losses = torch.zeros(chosen.shape, dtype=torch.float64)  # (B, T)
            losses[chosen] = -log_probs.gather(1, targets.cpu()[chosen].unsqueeze(-1)).squeeze(-1)
            result[name] = losses
        return result


def local_mask(n_positions: int, radius: int, device: torch.device | str | None = None) -> Tensor:
    """Local mask ``(T, T)``: position ``i`` may attend to ``j`` when ``|i - j| <= radius``, a two-sided sliding
    window (the local attention of Longformer, Beltagy et al., 2020); ``n`` such layers reach ``n * radius`` away."""
    if isinstance(radius, bool) or not isinstance(radius, int) or radius < 0:
        raise ValueError(f"radius must be an int >= 0 (positions seen on either side), got {radius!r}")
    i = torch.arange(n_positions, device=device)  # (T,)
    return (i[:, None] - i[None, :]).abs() <= radius  # (T, T)


class LocalEncoder(Encoder):
    """The layers of ``encoder`` (shared, not copied; the same parameter names) with local self-attention: whatever
    mask it is given, each position attends only to the positions at most ``radius`` away (:func:`local_mask`)."""

    def __init__(self, encoder: Encoder, radius: int):
        nn.Module.__init__(self)
        local_mask(1, radius)  # a bad radius fails here, not at the first forward pass
        self.layers, self.norm, self.radius = encoder.layers, encoder.norm, radius

    def forward(self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False,
                caches: list | None = None) -> tuple[Tensor, list[Tensor | None]]:
        local = local_mask(x.shape[1], self.radius, x.device)  # (T, T)
        return super().forward(x, local if mask is None else mask & local, need_weights, caches)  # (B, 1, T, T)


class MaskedLM(nn.Module):
    """An encoder with BERT's masked-language-model head: a dense layer, GELU and LayerNorm, then an output layer
    tied to the token embedding. Its ``embed``, ``positions`` and ``encoder`` have the names and shapes of an
    :class:`tfm.EncoderClassifier` of the same sizes, so :func:`classifier_from` can hand them on. With
    ``attention_radius``, its encoder is a :class:`LocalEncoder`."""

    def __init__(self, n_vocab: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2, d_ff: int = 128,
                 dropout: float = 0.1, max_len: int = 128, pad_id: int = 0, positional: str = "learned",
                 activation: str = "gelu", norm_first: bool = False, attention_radius: int | None = None):
        super().__init__()
        self.sizes = dict(n_vocab=n_vocab, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff,
                          dropout=dropout, max_len=max_len, pad_id=pad_id, positional=positional,
                          activation=activation, norm_first=norm_first, attention_radius=attention_radius)
        self.pad_id = pad_id
        self.embed = TokenEmbedding(n_vocab, d_model, padding_idx=pad_id)
        self.positions = POSITIONAL[positional](d_model, max_len, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, activation, norm_first)
        if attention_radius is not None:
            self.encoder = LocalEncoder(self.encoder, attention_radius)
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
    randomly initialised head on top), attending as ``mlm``'s does (a :class:`LocalEncoder` with
    ``attention_radius``). With ``mlm=None`` the same classifier is built from scratch with ``sizes``."""
    if mlm is not None:
        if sizes:
            raise ValueError(f"sizes come from the pretrained model; do not pass {sorted(sizes)}")
        sizes = mlm.sizes
    sizes = dict(sizes)
    radius = sizes.pop("attention_radius", None)
    classifier = EncoderClassifier(n_classes=n_classes, pooling=pooling, **sizes)
    if radius is not None:
        classifier.encoder = LocalEncoder(classifier.encoder, radius)
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
    ``eval_every`` steps: in ``history["eval_loss"]`` over all chosen positions, and in ``history["eval_by_kind"]``
    (a dict: :data:`KINDS` -> list) separately at each kind of chosen position (:func:`losses_by_kind`). Returns
    :func:`tfm.train`'s history; the model ends in eval mode."""
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

    evaluate, by_kind = None, {kind: [] for kind in KINDS}
    if held_out:
        original = pad(held_out, pad_id)  # (N, T)
        fixed = mask_tokens(original, mask_id, first_normal_id, n_vocab, generator=generator(12345))
        fixed = tuple(t.to(device) for t in (original, *fixed))

        def evaluate(model: MaskedLM) -> float:
            losses = losses_by_kind(model, *fixed, mask_id)
            for kind in KINDS:
                by_kind[kind].append(losses[kind])
            return losses["all"]

    history = train(model, next_batch, lambda m, batch: m.loss(*batch), optimizer, steps, scheduler=scheduler,
                    clip_norm=1.0, evaluate=evaluate, eval_every=eval_every)
    if held_out:
        history["eval_by_kind"] = by_kind
    return history


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
    def bottom(self, ids: Tensor, attention_mask: Tensor, batch_size: int = 64) -> Tensor:
        """Token ids and Hugging Face's attention mask ``(B, T)`` -> frozen states ``(B, T, d_model)``. The sentences
        run in batches of similar length, each batch cut to its longest sentence, so that padding costs no compute;
        the states come back in the sentences' order, zero at the padding."""
        self.bert.eval()
        lengths = attention_mask.sum(1)  # (B,)
        order = lengths.argsort(stable=True)  # (B,): shortest first
        d_model = self.bert.embeddings.word.embedding_dim
        states = torch.zeros(*ids.shape, d_model, device=ids.device)  # (B, T, d_model)
        for start in range(0, len(order), batch_size):
            rows = order[start: start + batch_size]
            n = int(lengths[rows].max())
            x = self.bert.embeddings(ids[rows, :n])  # (b, n, d_model)
            mask = combine_masks(attention_mask[rows, :n].bool())  # (b, 1, 1, n)
            for layer in self.bert.encoder.layers[: self.n_bottom]:
                x, _ = layer(x, mask)
            states[rows, :n] = x
        return states

    @staticmethod
    def _run(layers: nn.ModuleList, states: Tensor, attention_mask: Tensor) -> Tensor:
        """``layers`` on ``states (B, T, d_model)``, cut to the longest sentence of the batch -> the mean of the real
        tokens' final states ``(B, d_model)``."""
        n = int(attention_mask.sum(1).max())
        keys = attention_mask[:, :n].bool()  # (B, n)
        x, mask = states[:, :n], combine_masks(keys)
        for layer in layers:
            x, _ = layer(x, mask)
        return mean_pool(x, keys)  # (B, d_model)

    def forward(self, states: Tensor, attention_mask: Tensor) -> Tensor:
        """States from :meth:`bottom` ``(B, T, d_model)`` -> logits ``(B, n_classes)``."""
        return self.head(self._run(self.top, states, attention_mask))  # (B, n_classes)

    @torch.no_grad()
    def pooled(self, states: Tensor, attention_mask: Tensor) -> Tensor:
        """The pretrained model's own sentence embedding, from :meth:`bottom`'s states: its top layers (the frozen
        originals, not the trainable copies) and the mean of the real tokens' final states -> ``(B, d_model)``, as
        sentence-transformers pools MiniLM (before it scales each embedding to length 1)."""
        self.bert.eval()
        return self._run(self.bert.encoder.layers[self.n_bottom:], states, attention_mask)
