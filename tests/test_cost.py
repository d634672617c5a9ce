"""tfm.cost: the counts agree with real tensors, and the measuring tools measure."""

import math
import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import tfm
from tfm.cost import (
    allocated_bytes,
    attention_crossover,
    attention_flops,
    fastest_seconds,
    kv_cache_bytes,
    layer_flops,
    linear_flops,
    loglog_slope,
    median_seconds,
    profiled_flops,
    quadratic_flops,
    score_matrix_bytes,
)


def test_score_matrix_bytes_is_the_size_of_the_weights():
    q = torch.randn(2, 3, 5, 8)
    _, weights = tfm.attention(q, torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4))
    assert score_matrix_bytes(5, 7, heads=3, batch=2) == weights.numel() * weights.element_size()
    assert score_matrix_bytes(5, 7, dtype=torch.float16) == 5 * 7 * 2


def test_attention_flops_counts_two_matrix_products():
    assert attention_flops(T=3, S=5, d_k=4, d_v=6) == 2 * 3 * 5 * 4 + 2 * 3 * 5 * 6
    assert attention_flops(T=3, S=5, d_k=4, heads=2, batch=3) == 6 * attention_flops(3, 5, 4)


def test_layer_flops_by_hand_for_a_tiny_layer():
    # d_model 4, d_ff 8, T 3: each projection is a (3, 4) @ (4, 4) product, 3·4·4 = 48 multiply-adds, 4 of them;
    # Q Kᵀ and A V are 3·3·4 = 36 multiply-adds each; the FFN is (3, 4) @ (4, 8) and (3, 8) @ (8, 4), 2·96.
    counts = layer_flops(T=3, d_model=4, d_ff=8)
    assert counts == {"projections": 2 * 4 * 48, "scores": 2 * 36, "weighted_sum": 2 * 36, "feed_forward": 2 * 192}
    assert layer_flops(T=3, d_model=4, d_ff=8, batch=5) == {k: 5 * v for k, v in counts.items()}
    assert quadratic_flops(counts) == attention_flops(3, 3, d_k=2, heads=2)
    assert linear_flops(counts) == 384 + 384


@pytest.mark.parametrize("T, d_model, heads, d_ff, batch", [(7, 16, 2, 40, 3), (33, 24, 4, 96, 1)])
def test_layer_flops_agrees_with_torch_flop_counter(T, d_model, heads, d_ff, batch):
    layer = tfm.EncoderLayer(d_model, heads, d_ff, dropout=0.0, fast=False).eval()  # explicit attention: counted
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(torch.randn(batch, T, d_model))
    assert counter.get_total_flops() == sum(layer_flops(T, d_model, d_ff, batch=batch).values())


def test_profiled_flops_counts_the_matrix_products_of_a_layer():
    layer = tfm.EncoderLayer(16, 2, 40, dropout=0.0, fast=False).eval()
    x = torch.randn(3, 7, 16)  # (B, T, d_model)
    with torch.no_grad():
        assert profiled_flops(lambda: layer(x)) == sum(layer_flops(7, 16, 40, batch=3).values())
    a, b = torch.randn(5, 6), torch.randn(6, 4)
    assert profiled_flops(lambda: a @ b) == 2 * 5 * 6 * 4
    assert profiled_flops(lambda: a + 1) == 0


def test_attention_crossover_solves_quadratic_equals_linear():
    for d_model, d_ff in [(768, 3072), (128, 512), (64, 100), (5, 3)]:
        t_star = attention_crossover(d_model, d_ff)
        assert t_star == 2 * d_model + d_ff
        at = layer_flops(t_star, d_model, d_ff)
        assert quadratic_flops(at) == linear_flops(at)
        below, above = layer_flops(t_star - 1, d_model, d_ff), layer_flops(t_star + 1, d_model, d_ff)
        assert quadratic_flops(below) < linear_flops(below) and quadratic_flops(above) > linear_flops(above)
    assert attention_crossover(768, 3072) == 4608  # BERT-base; without the FFN it would be 2·768 = 1536


@pytest.mark.parametrize("bad", [dict(T=0, d_model=4, d_ff=8), dict(T=3, d_model=-1, d_ff=8),
                                 dict(T=3, d_model=4, d_ff=2.5), dict(T=3, d_model=4, d_ff=8, batch=0)])
def test_layer_flops_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="positive integer"):
        layer_flops(**bad)


def test_loglog_slope_recovers_a_power_law():
    xs = [128, 256, 512, 1024]
    assert math.isclose(loglog_slope(xs, [3.0 * x**2 for x in xs]), 2.0, rel_tol=1e-12)
    assert math.isclose(loglog_slope(xs, [0.5 * x**0.5 for x in xs]), 0.5, rel_tol=1e-12)
    assert math.isclose(loglog_slope([1, 2], [5, 5]), 0.0, abs_tol=1e-12)


@pytest.mark.parametrize("xs, ys, message", [([1, 2], [1], "same length"), ([1], [1], "at least 2"),
                                             ([1, 0], [1, 2], "positive"), ([2, 2], [1, 3], "equal")])
def test_loglog_slope_rejects_bad_input(xs, ys, message):
    with pytest.raises(ValueError, match=message):
        loglog_slope(xs, ys)


def test_kv_cache_bytes_matches_a_filled_cache():
    lm = tfm.CausalLM(n_vocab=11, d_model=16, n_heads=2, n_layers=3, d_ff=32, max_len=32).eval()
    caches = [{} for _ in lm.decoder.layers]
    with torch.no_grad():
        lm(torch.randint(0, 11, (2, 9)), caches=caches)
    stored = sum(t.numel() * t.element_size() for cache in caches for t in cache.values())
    assert stored == kv_cache_bytes(n_layers=3, S=9, d_model=16, batch=2)


def test_allocated_bytes_sees_the_score_matrices_once_each():
    x = torch.randn(1, 2, 256, 16)  # (B, h, T, d_k)
    one, output = score_matrix_bytes(256, 256, heads=2), x.numel() * x.element_size()
    explicit = allocated_bytes(lambda: tfm.attention(x, x, x))
    # Q Kᵀ, the scaled scores and the softmax's output, plus the (B, h, T, d_v) output and a few scalar bytes;
    # counting the matmul and the bmm it calls separately would give 5 score matrices.
    assert 3 * one + output <= explicit < 3 * one + output + 64
    assert allocated_bytes(lambda: None) == 0
    assert allocated_bytes(lambda: torch.empty(1000)) == 4000


def test_allocated_bytes_counts_on_the_threads_asked_and_restores_them():
    original = torch.get_num_threads()
    torch.set_num_threads(2)  # so that asking for 1 thread changes something even under OMP_NUM_THREADS=1
    try:
        seen = []
        assert allocated_bytes(lambda: seen.append(torch.get_num_threads()), threads=1) == 0
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(original)
    x = torch.randn(1, 2, 128, 16)
    one = score_matrix_bytes(128, 128, heads=2)
    assert allocated_bytes(lambda: tfm.attention(x, x, x), threads=1) >= 3 * one
    with pytest.raises(ValueError, match="threads"):
        allocated_bytes(lambda: None, threads=0)


def test_median_seconds_is_a_positive_duration():
    calls = []
    seconds = median_seconds(lambda: calls.append(1), repeats=3, warmup=2)
    assert seconds >= 0 and len(calls) == 5


def test_fastest_seconds_is_the_quickest_run_not_the_median():
    delays = iter([0.0, 0.03, 0.002, 0.03])  # the warm-up call, then three timed runs

    def sleep_next():
        time.sleep(next(delays))

    seconds = fastest_seconds(sleep_next, repeats=3, warmup=1)
    assert 0.002 <= seconds < 0.02  # the 2 ms run, not the 30 ms median


def test_median_seconds_restores_the_thread_count():
    before = torch.get_num_threads()
    seen = []
    median_seconds(lambda: seen.append(torch.get_num_threads()), repeats=2, warmup=0, threads=1)
    assert seen == [1, 1] and torch.get_num_threads() == before
