"""tfm.pretraining: BERT's 80/10/10 masking, the masked-LM head against Hugging Face's, the hand-over of a pretrained
encoder to a classifier, and MiniLM's top layers fine-tuned on frozen bottom states."""

from __future__ import annotations

import math
import os
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

import tfm
from tfm.interop import bert_from_hf, minilm_path
from tfm.model import mean_pool
from tfm.pretraining import (
    IGNORE,
    KINDS,
    CountBaselines,
    LocalEncoder,
    MaskedLM,
    TopLayersClassifier,
    accuracy,
    classifier_from,
    fine_tune,
    local_mask,
    losses_by_kind,
    mask_tokens,
    position_kinds,
    pretrain_mlm,
    windows,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MASK, FIRST, N_VOCAB = 4, 5, 50
SIZES = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=12, pad_id=0)


def test_masking_chooses_15_percent_of_real_tokens_and_replaces_them_80_10_10():
    ids = torch.randint(FIRST, N_VOCAB, (400, 500), generator=torch.Generator().manual_seed(0))  # (B, T)
    ids[:, -50:] = 0  # padding
    ids[:, 0] = 2  # a [CLS] at the start of every row
    inputs, targets = mask_tokens(ids, MASK, FIRST, N_VOCAB, generator=torch.Generator().manual_seed(1))
    chosen = targets != IGNORE
    assert not chosen[:, -50:].any() and not chosen[:, 0].any(), "special tokens and padding are never chosen"
    real = ids >= FIRST
    assert abs(chosen.sum().item() / real.sum().item() - 0.15) < 0.005
    assert torch.equal(targets[chosen], ids[chosen]), "the target is the original token"
    assert torch.equal(inputs[~chosen], ids[~chosen]), "positions not chosen are left alone"
    masked = (inputs[chosen] == MASK).float().mean().item()
    kept = (inputs[chosen] == ids[chosen]).float().mean().item()
    assert abs(masked - 0.8) < 0.01
    # a random replacement equals the original with probability 1/45, so "kept" is 10% plus 10%/45
    assert abs(kept - (0.1 + 0.1 / (N_VOCAB - FIRST))) < 0.01
    replaced = inputs[chosen][(inputs[chosen] != MASK) & (inputs[chosen] != ids[chosen])]
    assert replaced.min() >= FIRST and replaced.max() < N_VOCAB, "random replacements are ordinary tokens"


def test_masking_is_repeatable_with_a_generator_and_rejects_bad_input():
    ids = torch.randint(FIRST, N_VOCAB, (4, 9))
    a = mask_tokens(ids, MASK, FIRST, N_VOCAB, generator=torch.Generator().manual_seed(3))
    b = mask_tokens(ids, MASK, FIRST, N_VOCAB, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        mask_tokens(ids[0], MASK, FIRST, N_VOCAB)
    with pytest.raises(ValueError, match="rate"):
        mask_tokens(ids, MASK, FIRST, N_VOCAB, rate=1.5)
    with pytest.raises(ValueError, match="n_vocab=10"):
        mask_tokens(ids, MASK, FIRST, 10)
    with pytest.raises(ValueError, match="mask_id"):
        mask_tokens(ids, 7, FIRST, N_VOCAB)


def test_masked_lm_head_matches_hugging_face_bert_head():
    transformers = pytest.importorskip("transformers")
    from transformers.models.bert.modeling_bert import BertLMPredictionHead

    torch.manual_seed(0)
    mlm = MaskedLM(N_VOCAB, **SIZES).eval()
    config = transformers.BertConfig(hidden_size=16, vocab_size=N_VOCAB, hidden_act="gelu", layer_norm_eps=1e-5)
    head = BertLMPredictionHead(config).eval()
    with torch.no_grad():
        head.transform.dense.weight.copy_(mlm.transform[0].weight)
        head.transform.dense.bias.copy_(mlm.transform[0].bias)
        head.transform.LayerNorm.weight.copy_(mlm.transform[2].weight)
        head.transform.LayerNorm.bias.copy_(mlm.transform[2].bias)
        head.decoder.weight.copy_(mlm.embed.weight)  # BERT ties the output layer to the word embedding
        head.decoder.bias.copy_(torch.randn(N_VOCAB))  # the output-only bias (BERT ties head.bias to it)
        mlm.bias.copy_(head.decoder.bias)
        states = torch.randn(3, 7, 16)
        assert (mlm.predict(states) - head(states)).abs().max().item() < 1e-5


def test_loss_at_chosen_positions_equals_cross_entropy_of_all_logits():
    torch.manual_seed(0)
    mlm = MaskedLM(N_VOCAB, **SIZES).eval()
    ids = torch.randint(FIRST, N_VOCAB, (5, 12))
    inputs, targets = mask_tokens(ids, MASK, FIRST, N_VOCAB, rate=0.3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = F.cross_entropy(mlm(inputs).flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        assert abs(mlm.loss(inputs, targets).item() - full.item()) < 1e-5
    with pytest.raises(ValueError, match="no position is chosen"):
        mlm.loss(inputs, torch.full_like(targets, IGNORE))
    with pytest.raises(ValueError, match="one shape"):
        mlm.loss(inputs, targets[:, :3])


def test_classifier_from_hands_over_the_pretrained_encoder_and_nothing_else():
    torch.manual_seed(0)
    mlm = MaskedLM(N_VOCAB, **SIZES).eval()
    clf = classifier_from(mlm, n_classes=3, pooling="mean").eval()
    ids = torch.randint(FIRST, N_VOCAB, (4, 10))
    ids[0, 7:] = 0
    keys = ids != 0
    with torch.no_grad():
        states, _ = clf.encoder(clf.positions(clf.embed(ids)), tfm.combine_masks(keys))
        assert torch.equal(states, mlm.encode(ids))
        assert torch.allclose(clf(ids), clf.head(mean_pool(mlm.encode(ids), keys)))
    scratch = classifier_from(None, n_classes=3, pooling="mean", n_vocab=N_VOCAB, **SIZES)
    assert not torch.equal(scratch.embed.weight, mlm.embed.weight)
    assert tfm.count_parameters(scratch) == tfm.count_parameters(clf)
    with pytest.raises(ValueError, match="sizes come from the pretrained model"):
        classifier_from(mlm, 3, d_model=8)


def test_pretraining_lowers_the_held_out_loss_of_a_repetitive_language():
    # sequences that repeat a 3-token motif: the masked token is predictable from its neighbours
    motif = [[2] + [FIRST + (i + j) % 3 for j in range(10)] for i in range(3)]
    tfm.seed_everything(0)
    mlm = MaskedLM(N_VOCAB, **SIZES)
    history = pretrain_mlm(mlm, motif * 20, steps=150, mask_id=MASK, first_normal_id=FIRST, batch_size=16,
                           lr=3e-3, warmup=10, held_out=motif, eval_every=50)
    assert history["eval_step"] == [0, 50, 100, 150]
    assert history["eval_loss"][-1] < 1.0 and history["eval_loss"][0] > 3.0  # uniform guessing: log 45 = 3.8
    assert not mlm.training


def test_fine_tune_learns_a_separable_task_and_accuracy_counts_right_answers():
    tfm.seed_everything(0)
    ids = torch.randint(FIRST + 1, N_VOCAB, (64, 8))
    labels = torch.arange(64) % 2
    ids[labels == 1, 3] = FIRST  # class 1 contains one telltale token
    clf = classifier_from(None, n_classes=2, pooling="mean", n_vocab=N_VOCAB, **SIZES)
    fine_tune(clf, (ids,), labels, steps=120, lr=3e-3, batch_size=16)
    assert accuracy(clf, (ids,), labels, batch_size=10) == 1.0
    assert accuracy(clf, (ids,), 1 - labels) == 0.0
    with pytest.raises(ValueError, match="one per label"):
        fine_tune(clf, (ids[:10],), labels, steps=1)


def test_windows_cut_a_paragraph_behind_a_cls_token():
    assert windows(list(range(10, 30)), length=8, cls_id=2, min_length=3) == [
        [2, *range(10, 17)], [2, *range(17, 24)], [2, *range(24, 30)]]
    assert windows(list(range(10, 25)), length=8, cls_id=2, min_length=3) == [[2, *range(10, 17)],
                                                                              [2, *range(17, 24)]]
    with pytest.raises(ValueError, match="length"):
        windows([1, 2], length=1, cls_id=2)


@pytest.fixture(scope="module")
def minilm():
    transformers = pytest.importorskip("transformers")
    path = minilm_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return tokenizer, bert_from_hf(transformers.AutoModel.from_pretrained(path, attn_implementation="eager"))


def test_top_layers_on_frozen_bottom_states_reproduce_the_whole_model(minilm):
    tokenizer, bert = minilm
    batch = tokenizer(["Assignment statements bind names to values.", "A tuple is immutable."], padding=True,
                      return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    first = TopLayersClassifier(bert, n_top=2, n_classes=4)
    clf = TopLayersClassifier(bert, n_top=2, n_classes=4)  # built after bert was frozen by the first
    clf.head = torch.nn.Identity()
    with torch.no_grad():
        hidden, _ = bert(ids, mask)
        expected = mean_pool(hidden[-1], mask.bool())
        states = clf.bottom(ids, mask, batch_size=1)  # one sentence a batch, each cut to its own length
        assert (states - hidden[-3] * mask[..., None]).abs().max().item() < 1e-5, "zero at the padding"
        assert (clf(states, mask) - expected).abs().max().item() < 1e-5
        assert (clf.pooled(states, mask) - expected).abs().max().item() < 1e-5
        wider = torch.cat([states, torch.zeros(2, 3, states.shape[-1])], 1)  # (2, T + 3, d): more padding
        assert (clf(wider, F.pad(mask, (0, 3))) - expected).abs().max().item() < 1e-5
    assert all(p.requires_grad for p in clf.top.parameters()), "the copied top layers train"
    assert all(p.requires_grad for p in first.top.parameters())
    assert not any(p.requires_grad for p in bert.parameters()), "the pretrained model stays frozen"
    with pytest.raises(ValueError, match="n_top must lie in 1..6"):
        TopLayersClassifier(bert, n_top=7, n_classes=2)


def test_position_kinds_split_the_chosen_positions_and_losses_by_kind_average_them():
    ids = torch.randint(FIRST, N_VOCAB, (300, 40), generator=torch.Generator().manual_seed(0))  # (B, T)
    inputs, targets = mask_tokens(ids, MASK, FIRST, N_VOCAB, generator=torch.Generator().manual_seed(1))
    kinds = position_kinds(ids, inputs, targets, MASK)
    assert list(kinds) == list(KINDS)
    together = kinds["[MASK]"].int() + kinds["random"].int() + kinds["kept"].int()
    assert torch.equal(together, (targets != IGNORE).int()), "every chosen position has exactly one kind"
    assert torch.equal(inputs[kinds["kept"]], ids[kinds["kept"]])
    assert not (inputs[kinds["random"]] == ids[kinds["random"]]).any()
    torch.manual_seed(0)
    mlm = MaskedLM(N_VOCAB, **SIZES | {"max_len": 40}).eval()
    by_kind = losses_by_kind(mlm, ids[:20], inputs[:20], targets[:20], MASK)
    with torch.no_grad():
        full = F.cross_entropy(mlm(inputs[:20]).transpose(1, 2), targets[:20], reduction="none")  # (B, T), 0 if IGNORE
        assert abs(by_kind["all"] - mlm.loss(inputs[:20], targets[:20]).item()) < 1e-5
    for kind in KINDS:
        assert abs(by_kind[kind] - full[kinds[kind][:20]].mean().item()) < 1e-5
    with pytest.raises(ValueError, match="one shape"):
        position_kinds(ids, inputs[:, :3], targets, MASK)


def test_count_baselines_match_counts_done_by_hand():
    # a tiny language: special ids 0..4, ordinary 5..9; "[CLS] 5 6 7 5 6" and "[CLS] 6 7 8"
    sequences = [[2, 5, 6, 7, 5, 6], [2, 6, 7, 8]]
    n_vocab, first = 10, 5
    base = CountBaselines(sequences, n_vocab, first, copy=0.5, strength=1.0)
    counts = {5: 2, 6: 3, 7: 2, 8: 1, 9: 0}
    total = sum(c + 1 for c in counts.values())
    unigram = {t: (c + 1) / total for t, c in counts.items()}
    assert all(abs(base.unigram_probs[t].item() - p) < 1e-12 for t, p in unigram.items())
    assert base.unigram_probs[:first].sum().item() == 0.0
    pair = Counter([(5, 6), (6, 7), (7, 5), (5, 6), (6, 7), (7, 8)])
    seen = Counter(a for a, _ in pair.elements())

    def p_next(a, b):  # p(b | a), interpolated with the unigram (k = 1)
        return (pair[(a, b)] + unigram[b]) / (seen[a] + 1)

    # one row: [CLS] 5 [MASK] 7 6 and a random token (9) where 5 stood; targets: 6 at position 2, 5 at position 1,
    # 6 at position 4 (kept)
    inputs = torch.tensor([[2, 9, MASK, 7, 6]])
    targets = torch.tensor([[IGNORE, 5, 6, IGNORE, 6]])
    losses = base.losses(inputs, targets, MASK)
    # at the [MASK]: left neighbour 9, right neighbour 7
    scores = {x: p_next(9, x) * p_next(x, 7) for x in counts}
    expected = -math.log(scores[6] / sum(scores.values()))
    assert abs(losses["bigram"][0, 2].item() - expected) < 1e-9
    assert abs(losses["unigram"][0, 2].item() + math.log(unigram[6])) < 1e-12
    assert abs(losses["no_context"][0, 2].item() + math.log(unigram[6])) < 1e-12
    # at the random token 9 (target 5): the copy rule gives the visible 9 half the mass, the rest to the unigram
    assert abs(losses["no_context"][0, 1].item() + math.log(0.5 * unigram[5])) < 1e-12
    # [CLS] on the left is special: left out, the unigram stands in for p(x | l); right neighbour [MASK]: left out
    scores = {x: unigram[x] for x in counts}
    assert abs(losses["bigram"][0, 1].item() + math.log(0.5 * scores[5] / sum(scores.values()))) < 1e-9
    # the kept 6 at the end: left neighbour 7, no right neighbour (the edge)
    scores = {x: p_next(7, x) for x in counts}
    assert abs(losses["bigram"][0, 4].item() + math.log(0.5 + 0.5 * scores[6] / sum(scores.values()))) < 1e-9
    assert losses["bigram"][0, 0].item() == 0.0 and losses["bigram"][0, 3].item() == 0.0, "not chosen: no loss"
    with pytest.raises(ValueError, match="copy"):
        CountBaselines(sequences, n_vocab, first, copy=1.0)


def test_local_attention_reaches_radius_positions_per_layer():
    assert torch.equal(local_mask(4, 1), torch.tensor(
        [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]], dtype=torch.bool))
    assert local_mask(3, 0).equal(torch.eye(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="radius"):
        local_mask(4, -1)
    with pytest.raises(ValueError, match="radius"):
        MaskedLM(N_VOCAB, **SIZES | {"attention_radius": 1.5})
    torch.manual_seed(0)
    full = MaskedLM(N_VOCAB, **SIZES).eval()
    torch.manual_seed(0)
    mlm = MaskedLM(N_VOCAB, **SIZES | {"attention_radius": 1}).eval()  # 2 layers: each state sees 2 positions away
    assert isinstance(mlm.encoder, LocalEncoder) and list(mlm.state_dict()) == list(full.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(mlm.state_dict().values(), full.state_dict().values(), strict=True))
    ids = torch.randint(FIRST, N_VOCAB, (1, 12))
    changed = ids.clone()
    changed[0, 6] = FIRST if ids[0, 6] != FIRST else FIRST + 1
    with torch.no_grad():
        moved = (mlm.encode(ids) - mlm.encode(changed)).abs().amax(-1)[0]  # (T,)
        assert moved[4:9].min() > 0 and moved[:4].max() == 0 and moved[9:].max() == 0
        # the same as full attention under a banded mask, whatever the padding
        ids[0, 10:] = 0
        banded = tfm.combine_masks(ids != 0, local_mask(12, 1))  # (1, 1, 12, 12)
        expected, _ = full.encoder(full.positions(full.embed(ids)), banded)
        assert torch.allclose(mlm.encode(ids), expected, atol=1e-6)
    clf = classifier_from(mlm, n_classes=2, pooling="mean")
    assert isinstance(clf.encoder, LocalEncoder) and clf.encoder.radius == 1, "it attends as the MLM did"
    with torch.no_grad():
        assert torch.allclose(clf(ids), clf.head(mean_pool(mlm.encode(ids), ids != 0)), atol=1e-6)
    scratch = classifier_from(None, n_classes=2, pooling="mean", n_vocab=N_VOCAB, **SIZES | {"attention_radius": 1})
    assert isinstance(scratch.encoder, LocalEncoder)


def test_pretraining_records_the_held_out_loss_by_kind():
    motif = [[2] + [FIRST + (i + j) % 3 for j in range(10)] for i in range(3)]
    tfm.seed_everything(0)
    mlm = MaskedLM(N_VOCAB, **SIZES)
    history = pretrain_mlm(mlm, motif * 5, steps=4, mask_id=MASK, first_normal_id=FIRST, batch_size=4,
                           held_out=motif * 4, eval_every=2)
    assert list(history["eval_by_kind"]) == list(KINDS)
    assert all(len(v) == len(history["eval_step"]) == 3 for v in history["eval_by_kind"].values())
