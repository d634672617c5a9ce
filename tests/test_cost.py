"""tfm.cost: the counts agree with real tensors, and the measuring tools measure."""

import torch

import tfm
from tfm.cost import allocated_bytes, attention_flops, kv_cache_bytes, median_seconds, score_matrix_bytes


def test_score_matrix_bytes_is_the_size_of_the_weights():
    q = torch.randn(2, 3, 5, 8)
    _, weights = tfm.attention(q, torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4))
    assert score_matrix_bytes(5, 7, heads=3, batch=2) == weights.numel() * weights.element_size()
    assert score_matrix_bytes(5, 7, dtype=torch.float16) == 5 * 7 * 2


def test_attention_flops_counts_two_matrix_products():
    assert attention_flops(T=3, S=5, d_k=4, d_v=6) == 2 * 3 * 5 * 4 + 2 * 3 * 5 * 6
    assert attention_flops(T=3, S=5, d_k=4, heads=2, batch=3) == 6 * attention_flops(3, 5, 4)


def test_kv_cache_bytes_matches_a_filled_cache():
    lm = tfm.CausalLM(n_vocab=11, d_model=16, n_heads=2, n_layers=3, d_ff=32, max_len=32).eval()
    caches = [{} for _ in lm.decoder.layers]
    with torch.no_grad():
        lm(torch.randint(0, 11, (2, 9)), caches=caches)
    stored = sum(t.numel() * t.element_size() for cache in caches for t in cache.values())
    assert stored == kv_cache_bytes(n_layers=3, S=9, d_model=16, batch=2)


def test_allocated_bytes_sees_the_score_matrices():
    x = torch.randn(1, 2, 256, 16)
    explicit = allocated_bytes(lambda: tfm.attention(x, x, x))
    assert explicit >= 3 * score_matrix_bytes(256, 256, heads=2)
    assert allocated_bytes(lambda: None) == 0


def test_median_seconds_is_a_positive_duration():
    calls = []
    seconds = median_seconds(lambda: calls.append(1), repeats=3, warmup=2)
    assert seconds >= 0 and len(calls) == 5


def test_median_seconds_restores_the_thread_count():
    before = torch.get_num_threads()
    seen = []
    median_seconds(lambda: seen.append(torch.get_num_threads()), repeats=2, warmup=0, threads=1)
    assert seen == [1, 1] and torch.get_num_threads() == before
