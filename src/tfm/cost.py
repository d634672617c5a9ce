"""What attention costs: exact counts (FLOPs of attention and of a whole encoder layer, the length at which
attention's quadratic term overtakes the rest, bytes of the score matrix and of a key/value cache) and small measuring
tools (wall-clock times; bytes allocated by PyTorch on the CPU; the tensors a function creates; the slope of a log-log
plot). Counts are exact and the same on every machine; times are measurements, which other programs on the machine
can only lengthen.

FLOPs count the matrix products only, a multiply-add counted as 2 FLOPs (the convention of
``torch.utils.flop_counter``). Softmax, layer norms, biases, activations and residual additions are left out: they
are O(h·T·S + T·d_model) element-wise operations, a few per cent of the products for heads of width d_k = 64 (the
softmax does a handful of operations per score, against 4·d_k FLOPs per score in Q Kᵀ and A V)."""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import torch


def attention_flops(T: int, S: int, d_k: int, d_v: int | None = None, heads: int = 1, batch: int = 1) -> int:
    """Multiply-adds counted as 2 FLOPs: Q Kᵀ costs 2·T·S·d_k, A V costs 2·T·S·d_v, per head and example."""
    d_v = d_k if d_v is None else d_v
    return 2 * batch * heads * T * S * (d_k + d_v)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def layer_flops(T: int, d_model: int, d_ff: int, batch: int = 1) -> dict[str, int]:
    """FLOPs of one encoder layer's forward pass over ``T`` tokens (self-attention, then the feed-forward network).

    Multiply-adds count as 2 FLOPs; only the matrix products are counted (see the module's docstring). Returns the
    four terms, per batch of ``batch`` sequences:

    - ``"projections"``: Q, K, V and the output projection, four (T, d_model) @ (d_model, d_model) products,
      ``8·T·d_model²``;
    - ``"scores"``: Q Kᵀ for all heads together, ``2·T²·d_model``;
    - ``"weighted_sum"``: A V for all heads together, ``2·T²·d_model``;
    - ``"feed_forward"``: (T, d_model) @ (d_model, d_ff) and back, ``4·T·d_model·d_ff``.

    The number of heads does not appear: h heads of width d_k = d_model / h split the same work, they do not add to
    it. The first and last terms grow like T, the middle two like T².
    """
    _check_positive(T=T, d_model=d_model, d_ff=d_ff, batch=batch)
    return {
        "projections": batch * 4 * 2 * T * d_model * d_model,
        "scores": batch * 2 * T * T * d_model,
        "weighted_sum": batch * 2 * T * T * d_model,
        "feed_forward": batch * 2 * 2 * T * d_model * d_ff,
    }


def quadratic_flops(counts: dict[str, int]) -> int:
    """The terms of :func:`layer_flops` that grow like T² (Q Kᵀ and A V)."""
    return counts["scores"] + counts["weighted_sum"]


def linear_flops(counts: dict[str, int]) -> int:
    """The terms of :func:`layer_flops` that grow like T (the four projections and the feed-forward network)."""
    return counts["projections"] + counts["feed_forward"]


def attention_crossover(d_model: int, d_ff: int) -> int:
    """The length T* at which the quadratic terms of :func:`layer_flops` equal the linear ones.

    4·T²·d_model = 8·T·d_model² + 4·T·d_model·d_ff gives T* = 2·d_model + d_ff: below it the projections and the
    feed-forward network cost more than Q Kᵀ and A V, above it less. For BERT-base (768, 3072) T* = 4608.
    """
    _check_positive(d_model=d_model, d_ff=d_ff)
    return 2 * d_model + d_ff


def score_matrix_bytes(T: int, S: int, heads: int = 1, batch: int = 1, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of one materialised score (or weight) tensor of shape (B, h, T, S)."""
    return batch * heads * T * S * torch.empty(0, dtype=dtype).element_size()


def decode_step_cost(n_weights: int, n_layers: int, d_model: int, S: int, batch: int = 1,
                     dtype: torch.dtype = torch.float16) -> dict[str, int]:
    """Counted cost of one decoding step with a key/value cache of ``S`` positions, ``batch`` sequences at once.

    ``"flops"``: 2 per weight of the matrix products (one multiply-add of each weight with the new token's input) and
    4·d_model per cached position and layer (q·k and a·v), for each sequence. ``"bytes"``: what the step must read from
    memory at least once: every weight (shared by the batch) and the whole cache of every sequence. In float16 and
    with one sequence, FLOPs and bytes are equal: 1 FLOP per byte read.
    """
    _check_positive(n_weights=n_weights, n_layers=n_layers, d_model=d_model, S=S, batch=batch)
    size = torch.empty(0, dtype=dtype).element_size()
    return {"flops": batch * (2 * n_weights + 4 * n_layers * S * d_model),
            "bytes": n_weights * size + kv_cache_bytes(n_layers, S, d_model, batch, dtype)}


def kv_cache_bytes(n_layers: int, S: int, d_model: int, batch: int = 1, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of a key/value cache holding S positions: keys and values (2) of width d_model = h·d_k per layer."""
    return 2 * n_layers * batch * S * d_model * torch.empty(0, dtype=dtype).element_size()


def run_seconds(fn: Callable[[], object], repeats: int = 7, warmup: int = 1, threads: int | None = None) -> list[float]:
    """Wall-clock seconds of ``repeats`` calls of ``fn()`` after ``warmup`` calls, on ``threads`` CPU threads."""
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
    return times


def median_seconds(fn: Callable[[], object], repeats: int = 5, warmup: int = 1, threads: int | None = None) -> float:
    """Median wall-clock time of ``fn()`` over ``repeats`` runs, after ``warmup`` runs (CUDA is synchronised).

    ``threads`` sets PyTorch's CPU threads for the measurement (restored afterwards): one thread is far less disturbed
    by other programs on the machine, whose scheduling otherwise makes multi-threaded operators wait for each other.
    """
    return statistics.median(run_seconds(fn, repeats, warmup, threads))


def fastest_seconds(fn: Callable[[], object], repeats: int = 7, warmup: int = 1, threads: int | None = None) -> float:
    """Fastest wall-clock time of ``fn()`` over ``repeats`` runs, as :func:`median_seconds` measures them: other
    programs on the machine can only add time to a run, so the minimum is the least disturbed estimate."""
    return min(run_seconds(fn, repeats, warmup, threads))


@contextmanager
def _profiled(threads: int | None, **options: bool) -> Iterator[torch.autograd.profiler.profile]:
    """PyTorch's autograd profiler on ``threads`` CPU threads (restored afterwards), its C++ log lines on stderr
    silenced. It records what torch.profiler.profile records without that one's seconds-long start-up."""
    if threads is not None:
        _check_positive(threads=threads)
    saved_threads = torch.get_num_threads()
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        with torch.autograd.profiler.profile(**options) as prof:
            yield prof
    finally:
        torch.set_num_threads(saved_threads)
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def allocated_bytes(fn: Callable[[], object], threads: int | None = None) -> int:
    """Total bytes that PyTorch allocates on the CPU while ``fn()`` runs (freed or not), via the profiler.

    Each allocation is counted once, from the profiler's raw memory records (an operator's own memory figure also
    includes the allocations of the operators it calls, so adding those up would count nested calls twice). This
    counts every intermediate tensor, so it shows which computations materialise large temporaries. ``threads`` sets
    PyTorch's CPU threads while counting (restored afterwards), as in :func:`median_seconds`: some kernels (PyTorch's
    fused attention on the CPU) allocate a work buffer per thread, so the total depends on it.
    """
    with _profiled(threads, profile_memory=True) as prof:
        fn()
    try:  # the raw records are not public API: fail clearly if a PyTorch release moves them
        cpu = torch._C._autograd.DeviceType.CPU
        return sum(e.nbytes() for e in prof.kineto_results.events()
                   if e.name() == "[memory]" and e.device_type() == cpu and e.nbytes() > 0)
    except AttributeError as error:
        raise RuntimeError(f"allocated_bytes reads the profiler's raw memory records (kineto_results), which this "
                           f"PyTorch ({torch.__version__}) does not provide as expected: {error}") from error


ATTENTION_KERNELS = ("scaled_dot_product", "flash_attention", "efficient_attention", "multi_head_attention")


def score_sized_tensors(fn: Callable[[], object], T: int, S: int, pairs: int = 1) -> tuple[object, list[str]]:
    """Run ``fn()`` and return its result with every PyTorch call that made a (T, S) matrix on the way, for an
    attention over ``pairs`` (batch, head) pairs: a floating-point tensor whose last two dimensions hold at least
    T·S/2 numbers, or that holds at least pairs·T·S/2 (the scores, however arranged), or a fused attention kernel
    (which holds the scores inside). An attention that works on (T, block) tiles with block < S/2 yields none.

    Every call of a PyTorch function or tensor method is seen, however it is reached (``tfm.attention``, ``@``,
    ``F.softmax``), through a ``TorchFunctionMode``. Entries read ``"softmax (1, 2, 300, 300)"``."""
    from torch.overrides import TorchFunctionMode

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", str(func))
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() > 0:
                    slab = t.shape[-1] * (t.shape[-2] if t.dim() > 1 else 1)  # numbers in its last two dimensions
                    if 2 * slab >= T * S or 2 * t.numel() >= pairs * T * S:
                        found.append(f"{name} {tuple(t.shape)}")
            if any(kernel in name for kernel in ATTENTION_KERNELS):
                found.append(f"{name} (a fused attention kernel)")
            return out

    _check_positive(T=T, S=S, pairs=pairs)
    found: list[str] = []
    with Spy():
        result = fn()
    return result, found


def key_length_tensors(fn: Callable[[], object], T: int, S: int) -> tuple[object, list[str]]:
    """Run ``fn()`` and return its result with every PyTorch call that made a new floating-point tensor (not a view of
    another) that could be rows of scores against (half of) all ``S`` keys, for ``T`` queries: its last dimension holds
    at least S/2 numbers and it has at most T rows (the dimension before the last). Attention split by query rows
    makes such rows, however few queries each part holds; an online softmax over key blocks of fewer than S/2 keys
    makes none. Choose T below the width of the keys, so that the keys transposed, (d_k, S), are not taken for
    scores. Entries read ``"softmax (1, 2, 1, 640)"``."""
    from torch.overrides import TorchFunctionMode

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in torch.utils._pytree.tree_leaves(out):
                if (isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() > 0 and t._base is None
                        and 2 * t.shape[-1] >= S and (t.dim() == 1 or t.shape[-2] <= T)):
                    found.append(f"{getattr(func, '__name__', str(func))} {tuple(t.shape)}")
            return out

    _check_positive(T=T, S=S)
    found: list[str] = []
    with Spy():
        result = fn()
    return result, found


def peak_bytes(fn: Callable[[], object], threads: int | None = None) -> int:
    """The most bytes that PyTorch held on the CPU at any moment while ``fn()`` ran, above what it held before (the
    profiler's allocations and frees, in time order). A training step's peak is where the forward pass has stored
    every activation the backward pass needs; :func:`allocated_bytes` adds up every allocation instead."""
    with _profiled(threads, profile_memory=True) as prof:
        fn()
    try:  # the raw records are not public API: fail clearly if a PyTorch release moves them
        cpu = torch._C._autograd.DeviceType.CPU
        events = sorted((e.start_ns(), e.nbytes()) for e in prof.kineto_results.events()
                        if e.name() == "[memory]" and e.device_type() == cpu)
    except AttributeError as error:
        raise RuntimeError(f"peak_bytes reads the profiler's raw memory records (kineto_results), which this "
                           f"PyTorch ({torch.__version__}) does not provide as expected: {error}") from error
    held = peak = 0
    for _, nbytes in events:  # an allocation is positive, a free negative
        held += nbytes
        peak = max(peak, held)
    return peak


def saved_tensor_bytes(fn: Callable[[], object], exclude: Iterable[torch.Tensor] = ()) -> int:
    """Bytes of the tensors that autograd saves for the backward pass while ``fn()`` runs: the activations a training
    step keeps. Each storage counts once (a tensor saved twice, or several views of one tensor, once); the storages of
    ``exclude`` (pass ``model.parameters()``: the weights exist anyway) are left out. A counted, deterministic figure:
    it depends on the shapes and dtypes saved, not on the allocator."""
    left_out = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in left_out:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return sum(seen.values())


MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def profiled_flops(fn: Callable[[], object]) -> int:
    """FLOPs of the matrix products that ``fn()`` runs, as PyTorch's profiler counts them from their shapes.

    An independent check of :func:`layer_flops` (multiply-adds count 2). Only ``mm``, ``addmm``, ``bmm`` and
    ``baddbmm`` are added up: fused attention kernels get no count, so profile explicit attention.
    """
    with _profiled(None, with_flops=True) as prof:
        fn()
    return sum(e.flops for e in prof.function_events if e.name in MATRIX_PRODUCTS)


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x: the exponent k of a power law y ∝ x^k fitted to the points."""
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys must have the same length, got {len(xs)} and {len(ys)}")
    if len(xs) < 2:
        raise ValueError(f"a slope needs at least 2 points, got {len(xs)}")
    if any(not v > 0 for v in (*xs, *ys)):
        raise ValueError(f"log-log slope needs positive values, got xs={list(xs)}, ys={list(ys)}")
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mean_x, mean_y = statistics.fmean(lx), statistics.fmean(ly)
    spread = sum((a - mean_x) ** 2 for a in lx)
    if spread == 0:
        raise ValueError(f"all xs are equal ({xs[0]}): the slope is undefined")
    return sum((a - mean_x) * (b - mean_y) for a, b in zip(lx, ly, strict=True)) / spread
