"""Beam search's stopping rule, on a scripted model whose next-token probabilities depend only on the prefix."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

import tfm

PAD, BOS, EOS, A, B = range(5)

# next-token probabilities after each prefix (tokens after <bos>); anything unlisted ends at once
SCRIPT = {
    (): {EOS: 0.33, A: 0.31, B: 0.36},
    (A,): {EOS: 0.60, A: 0.20, B: 0.20},
    (B,): {EOS: 0.01, A: 0.04, B: 0.95},
    (A, A): {EOS: 0.90, A: 0.05, B: 0.05},
    (A, B): {EOS: 0.90, A: 0.05, B: 0.05},
    (B, B): {EOS: 0.99, A: 0.005, B: 0.005},
}


class ScriptedModel:
    """Just enough of an EncoderDecoder for tfm.beam_search and tfm.greedy_decode, without a cache."""

    config = SimpleNamespace(max_len=8, pad_id=PAD)
    decoder = SimpleNamespace(layers=[])

    def encode(self, src):
        return torch.zeros(src.shape[0], src.shape[1], 1), None  # (B, S, 1): unused

    def src_key_mask(self, src):
        return torch.ones_like(src, dtype=torch.bool)  # (B, S)

    def decode(self, prefix, memory, src_keys, caches=None, start=0):
        rows = []
        for row in prefix.tolist():  # prefix (k, t), starting with <bos>
            probs = torch.full((5,), 1e-9)
            for token, p in SCRIPT.get(tuple(row[1:]), {EOS: 1.0}).items():
                probs[token] = p
            rows.append(probs.log())
        return torch.stack(rows)[:, None, :].expand(-1, prefix.shape[1], -1), None  # (k, t, 5) log-probs as logits


def log_prob(sequence: list[int]) -> float:
    """Log-probability of <bos> ... <eos> under the script."""
    total, prefix = 0.0, ()
    for token in sequence[1:]:
        total += math.log(SCRIPT.get(prefix, {EOS: 1.0})[token])
        prefix += (token,)
    return total


def test_beam_search_keeps_going_while_a_live_prefix_can_still_win():
    # After two steps, two sequences have ended ("<eos>", 0.33, and "a <eos>", 0.19), as many as there are beams;
    # the best sequence, "b b <eos>" (0.36 · 0.95 · 0.99 ≈ 0.34), ends one step later, and greedy decoding finds it.
    # Stopping once beam_size sequences have finished returns "<eos>" alone, worse than greedy decoding.
    model, src = ScriptedModel(), torch.tensor([[4, 4]])
    beam = tfm.beam_search(model, src, max_len=6, bos_id=BOS, eos_id=EOS, beam_size=2, alpha=0.0,
                           use_cache=False)[0].tolist()
    greedy = tfm.greedy_decode(model, src, max_len=6, bos_id=BOS, eos_id=EOS, use_cache=False)[0].tolist()
    assert greedy == [BOS, B, B, EOS]
    assert beam == [BOS, B, B, EOS]
    assert log_prob(beam) >= log_prob(greedy)


def test_beam_search_stops_when_no_live_prefix_can_beat_the_best_finished():
    # with 3 beams the best sequence is found, and the search must still end (no live prefix can beat it)
    model, src = ScriptedModel(), torch.tensor([[4, 4]])
    for beam_size in (1, 2, 3, 4):
        for alpha in (0.0, 0.6):
            beam = tfm.beam_search(model, src, max_len=6, bos_id=BOS, eos_id=EOS, beam_size=beam_size, alpha=alpha,
                                   use_cache=False)[0].tolist()
            assert beam == [BOS, B, B, EOS], (beam_size, alpha, beam)
