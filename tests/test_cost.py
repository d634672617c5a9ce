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
    decode_step_cost,
    fastest_seconds,
    kv_cache_bytes,
    layer_flops,
    linear_flops,
    loglog_slope,
    median_seconds,
    profiled_flops,
    quadratic_flops,
    run_seconds,
    score_matrix_bytes,
    score_sized_tensors,
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


def test_run_seconds_gives_every_run():
    calls = []
    times = run_seconds(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(times) == 4 and all(t >= 0 for t in times) and len(calls) == 6


def test_decode_step_cost_counts_a_cached_step_of_a_real_model():
    lm = tfm.CausalLM(n_vocab=13, d_model=16, n_heads=2, n_layers=3, d_ff=40, max_len=32, dropout=0.0).eval()
    ids = torch.randint(0, 13, (2, 10))  # (B, T)
    caches = [{} for _ in lm.decoder.layers]
    with torch.no_grad():
        lm(ids[:, :9], caches=caches)  # 9 cached positions
        flops = profiled_flops(lambda: lm(ids[:, 9:], caches=caches, start=9, need_weights=True))  # explicit attention
    n_weights = sum(p.numel() for name, p in lm.named_parameters() if p.dim() == 2 and "positions" not in name)
    cost = decode_step_cost(n_weights, n_layers=3, d_model=16, S=10, batch=2, dtype=torch.float32)
    assert flops == cost["flops"]  # the new token attends to the 9 cached positions and itself: S = 10
    assert cost["bytes"] == 4 * n_weights + kv_cache_bytes(3, 10, 16, batch=2)
    one = decode_step_cost(n_weights, n_layers=3, d_model=16, S=10)  # float16, one sequence: 1 FLOP per byte
    assert one["flops"] == one["bytes"]
    with pytest.raises(ValueError, match="positive integer"):
        decode_step_cost(0, 3, 16, 10)


def _online_softmax_attention(q, k, v, block):
    """Attention over key blocks with a running maximum: (T, block) tiles of scores only."""
    m = torch.full(q.shape[:-1] + (1,), float("-inf"))  # (..., T, 1)
    den, out = torch.zeros(q.shape[:-1] + (1,)), torch.zeros(q.shape[:-1] + (v.shape[-1],))
    for s in range(0, k.shape[-2], block):
        scores = q @ k[..., s:s + block, :].transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., T, block)
        new = torch.maximum(m, scores.amax(-1, keepdim=True))
        p, c = torch.exp(scores - new), torch.exp(m - new)
        den, out, m = c * den + p.sum(-1, keepdim=True), c * out + p @ v[..., s:s + block, :], new
    return out / den


def _per_head_full(q, k, v):
    return torch.stack([tfm.attention(q[:, i], k[:, i], v[:, i])[0] for i in range(q.shape[1])], dim=1)


def _scores_with_t_in_front(q, k, v):
    scores = torch.einsum("bhtd,bhsd->tbhs", q, k) / q.shape[-1] ** 0.5  # (T, B, h, S): a short last-two slab
    return torch.einsum("tbhs,bhsd->bhtd", scores.softmax(-1), v)


def _torch_multi_head(q, k, v):
    # one call of PyTorch's fused multi-head attention, with identity projections: the scores stay inside it
    B, h, T, d_k = q.shape
    d_model = h * d_k
    rows = [t.transpose(1, 2).reshape(B, T, d_model).transpose(0, 1) for t in (q, k, v)]  # (T, B, d_model) each
    eye, zeros = torch.eye(d_model), torch.zeros(d_model)
    out, _ = torch.nn.functional.multi_head_attention_forward(
        *rows, d_model, h, None, None, None, None, False, 0.0, eye, zeros, need_weights=False,
        use_separate_proj_weight=True, q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye)  # (T, B, d_model)
    return out.transpose(0, 1).reshape(B, T, h, d_k).transpose(1, 2)  # (B, h, T, d_k)


@pytest.mark.parametrize("cheat", [
    lambda q, k, v: tfm.attention(q, k, v)[0],
    lambda q, k, v: tfm.fast_attention(q, k, v)[0],
    lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v),
    lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / 4, -1) @ v,  # d_k = 16
    _per_head_full,
    _scores_with_t_in_front,
    lambda q, k, v: _online_softmax_attention(q, k, v, block=200),  # "blocks" as large as the whole row
    _torch_multi_head,
], ids=["tfm.attention", "tfm.fast_attention", "sdpa", "softmax", "per-head", "T-in-front", "huge-blocks", "torch"])
def test_score_sized_tensors_catches_every_whole_score_matrix(cheat):
    q, k, v = torch.randn(3, 1, 2, 300, 16).unbind(0)  # (B, h, T, d_k) each
    result, found = score_sized_tensors(lambda: cheat(q, k, v), T=300, S=300, pairs=2)
    assert found, "a (T, S) matrix went unnoticed"
    torch.testing.assert_close(result, tfm.attention(q, k, v)[0], atol=1e-5, rtol=1e-5)


def test_score_sized_tensors_lets_blocks_through():
    q, k, v = torch.randn(3, 1, 2, 300, 16).unbind(0)
    result, found = score_sized_tensors(lambda: _online_softmax_attention(q, k, v, block=64), T=300, S=300, pairs=2)
    assert found == []
    torch.testing.assert_close(result, tfm.attention(q, k, v)[0], atol=1e-5, rtol=1e-5)
    _, found = score_sized_tensors(lambda: torch.where(torch.ones(300, 300, dtype=torch.bool), 0.0, -1.0), 300, 300)
    assert found and found[0].startswith("where")  # a float copy of a whole (T, S) mask counts too


def test_peak_bytes_is_the_most_held_at_once_not_the_total_allocated():
    def freed_then_smaller():
        a = torch.zeros(1000)  # 4,000 bytes
        del a
        return torch.zeros(500)  # 2,000 bytes, after the first was freed

    def both_held():
        return torch.zeros(1000), torch.zeros(500)

    assert tfm.cost.peak_bytes(freed_then_smaller) == 4000
    assert tfm.cost.peak_bytes(both_held) == 6000
    assert tfm.cost.allocated_bytes(freed_then_smaller) == 6000


def test_saved_tensor_bytes_counts_what_the_backward_pass_keeps():
    torch.manual_seed(0)
    linear = torch.nn.Linear(8, 16)
    x = torch.randn(4, 8, requires_grad=True)

    def step():
        linear(x).relu().sum().backward()

    # the linear layer keeps its input (4 x 8) and its weight (16 x 8), the ReLU its output (4 x 16), float32
    assert tfm.cost.saved_tensor_bytes(step) == 4 * (4 * 8 + 16 * 8 + 4 * 16)
    assert tfm.cost.saved_tensor_bytes(step, exclude=linear.parameters()) == 4 * (4 * 8 + 4 * 16)
