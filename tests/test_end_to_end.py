"""A small encoder–decoder really learns: trained for a few seconds to reverse sequences, greedy and beam search
decode held-out sequences correctly (and identically with and without the cache)."""

from __future__ import annotations

import pytest
import torch

import tfm
from tfm.data import Vocab, make_batch, random_batches, reverse_pairs, split_pairs


@pytest.fixture(scope="module")
def trained():
    tfm.seed_everything(0)
    pairs = reverse_pairs(3000, min_len=3, max_len=6, n_symbols=8, seed=0)
    train, test = split_pairs(pairs, 100)
    vocab = Vocab.from_sequences(s for s, _ in pairs)
    config = tfm.TransformerConfig(src_vocab=len(vocab), tgt_vocab=len(vocab), d_model=32, n_heads=4,
                                   n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0, max_len=16,
                                   share_embeddings=True)
    model = tfm.EncoderDecoder(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batches = random_batches(train, 64, vocab, vocab, seed=0)
    loss_fn = tfm.LabelSmoothingLoss(0.0, ignore_index=vocab.pad_id)

    def loss_step(model, batch):
        return loss_fn(model(batch.src, batch.tgt_in), batch.tgt_out)

    tfm.train(model, lambda: next(batches), loss_step, optimizer, 400, progress=False)
    return model, vocab, test


def exact_match(outputs, pairs, vocab):
    return sum(vocab.decode(out.tolist()) == tgt for out, (_, tgt) in zip(outputs, pairs, strict=True)) / len(pairs)


def test_greedy_decoding_reverses_held_out_sequences(trained):
    model, vocab, test = trained
    src = make_batch(test, vocab, vocab).src
    greedy = tfm.greedy_decode(model, src, 8, vocab.bos_id, vocab.eos_id)
    assert exact_match(greedy, test, vocab) >= 0.9
    assert torch.equal(greedy, tfm.greedy_decode(model, src, 8, vocab.bos_id, vocab.eos_id, use_cache=False))


def test_beam_search_is_at_least_as_good_here(trained):
    model, vocab, test = trained
    src = make_batch(test[:30], vocab, vocab).src
    beams = tfm.beam_search(model, src, 8, vocab.bos_id, vocab.eos_id, beam_size=3)
    assert exact_match(beams, test[:30], vocab) >= 0.9
