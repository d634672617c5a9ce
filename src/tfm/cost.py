"""What attention costs: exact counts (FLOPs, bytes of the score matrix and of a key/value cache) and two small
measuring tools (median wall-clock time; bytes allocated by PyTorch on the CPU)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import torch


def attention_flops(T: int, S: int, d_k: int, d_v: int | None = None, heads: int = 1, batch: int = 1) -> int:
    """Multiply-adds counted as 2 FLOPs: Q Kᵀ costs 2·T·S·d_k, A V costs 2·T·S·d_v, per head and example."""
    d_v = d_k if d_v is None else d_v
    return 2 * batch * heads * T * S * (d_k + d_v)


def score_matrix_bytes(T: int, S: int, heads: int = 1, batch: int = 1, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of one materialised score (or weight) tensor of shape (B, h, T, S)."""
    return batch * heads * T * S * torch.empty(0, dtype=dtype).element_size()


def kv_cache_bytes(n_layers: int, S: int, d_model: int, batch: int = 1, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of a key/value cache holding S positions: keys and values (2) of width d_model = h·d_k per layer."""
    return 2 * n_layers * batch * S * d_model * torch.empty(0, dtype=dtype).element_size()


def median_seconds(fn: Callable[[], object], repeats: int = 5, warmup: int = 1, threads: int | None = None) -> float:
    """Median wall-clock time of ``fn()`` over ``repeats`` runs, after ``warmup`` runs (CUDA is synchronised).

    ``threads`` sets PyTorch's CPU threads for the measurement (restored afterwards): one thread is far less disturbed
    by other programs on the machine, whose scheduling otherwise makes multi-threaded operators wait for each other.
    """
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    saved_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(saved_threads)
    return statistics.median(times)


def allocated_bytes(fn: Callable[[], object]) -> int:
    """Total bytes that PyTorch's CPU operators allocate while ``fn()`` runs (freed or not), via the profiler.

    This counts every intermediate tensor, so it shows which computations materialise large temporaries. The
    profiler's own C++ log lines on stderr are silenced.
    """
    from torch.profiler import ProfilerActivity, profile

    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    return sum(e.cpu_memory_usage for e in prof.events() if e.cpu_memory_usage > 0)
