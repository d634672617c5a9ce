"""Training beyond one device, on PyTorch's own engine (``torch.distributed``): starting processes from a notebook,
data parallelism that equals one process on the combined batch, and the memory and traffic arithmetic of
data-parallel training and of ZeRO / FSDP sharding (Rajbhandari et al., 2020).

:func:`spawn` runs a function in ``world_size`` fresh processes (the *spawn* start method, which works in Jupyter and
Colab: the function must live in an importable module, not in the notebook) joined in one process group: gloo on the
CPU, NCCL on CUDA GPUs. :func:`data_parallel_steps` is such a function: every rank builds the same model from the same
seed, wraps it in ``DistributedDataParallel``, and trains on its slice of each global batch; DDP averages the
gradients across ranks, so every rank takes the step that one process would take on the whole batch.
"""

from __future__ import annotations

import io
import os
import socket
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

# Bytes per parameter of mixed-precision Adam (Rajbhandari et al., 2020, §3.1): 16-bit parameters and gradients,
# and an optimizer state of a float32 master copy, momentum and variance.
ADAM_MIXED_BYTES = {"parameters": 2, "gradients": 2, "optimizer": 12}
# Bytes per parameter of Adam under autocast (chapter 16's recipe): float32 weights and gradients, two float32 moments.
ADAM_AUTOCAST_BYTES = {"parameters": 4, "gradients": 4, "optimizer": 8}


def default_backend(world_size: int) -> str:
    """NCCL when every rank can have a CUDA GPU of its own, gloo (CPU) otherwise."""
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world_size else "gloo"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, backend: str, fn: Callable, args: tuple, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # the ranks share this machine's cores
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        result = fn(rank, world_size, *args)
        buffer = io.BytesIO()
        torch.save(result, buffer)  # bytes, not shared-memory tensors: they outlive this process
        results.put((rank, buffer.getvalue()))
    finally:
        dist.destroy_process_group()


def spawn(fn: Callable[..., Any], world_size: int, *args: Any, backend: str | None = None) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` new processes joined in a process group; return what each
    rank returned, in rank order (it must be picklable: move tensors to the CPU). A rank that fails raises here."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    backend = backend or default_backend(world_size)
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    results = mp.get_context("spawn").SimpleQueue()
    processes = mp.start_processes(_worker, args=(world_size, _free_port(), backend, fn, args, results),
                                   nprocs=world_size, start_method="spawn", join=False)
    returned: dict[int, bytes] = {}
    done = False
    while not done:  # read while the ranks run (a large result would fill the pipe), until all have ended
        done = processes.join(timeout=0.1)  # raises if a rank failed, with its traceback
        while not results.empty():
            rank, blob = results.get()
            returned[rank] = blob
    return [torch.load(io.BytesIO(returned[rank]), weights_only=False) for rank in range(world_size)]


def rank_slice(batch_size: int, rank: int, world_size: int) -> slice:
    """The rows of a global batch that ``rank`` trains on: equal contiguous slices, one per rank."""
    if world_size > batch_size:
        raise ValueError(f"a global batch of {batch_size} cannot be split among {world_size} ranks: each needs a row")
    if batch_size % world_size:
        raise ValueError(f"the global batch of {batch_size} does not split evenly among {world_size} ranks: unequal "
                         "slices would weigh their rows differently in DDP's average of gradients")
    size = batch_size // world_size
    return slice(rank * size, (rank + 1) * size)


def data_parallel_steps(rank: int, world_size: int, make_model: Callable[[], nn.Module],
                        batches: list[tuple[torch.Tensor, torch.Tensor]], lr: float = 0.1,
                        seed: int = 0, every_step: bool = False) -> dict[str, torch.Tensor] | list:
    """Train a fresh ``make_model()`` with DistributedDataParallel and SGD for one step per global batch
    ``(inputs (B, T), targets (B, T))``, each rank on its slice; return the final weights (on the CPU), or with
    ``every_step`` the list of the weights after each step. Run it with :func:`spawn`. :func:`single_process_steps` is
    the same training in one process on the whole batches.

    SGD, because its step is linear in the gradient: DDP's gradients equal the big batch's up to float32 round-off,
    and so do the weights. Adam divides by the gradient's running size, so a gradient that is zero in exact arithmetic
    (a key projection's bias, which adds the same amount to every score of a row) has round-off noise of any sign,
    and Adam turns it into steps of size lr: the weights then differ by about lr there, although the gradients agree.
    """
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(seed)
    model = make_model()
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's weights: every rank starts from the same ones
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    weights = []
    for inputs, targets in batches:
        rows = rank_slice(len(inputs), rank, world_size)
        logits = ddp(inputs[rows])  # (B / world_size, T, n_vocab)
        loss = F.cross_entropy(logits.transpose(1, 2), targets[rows])  # the mean over this rank's tokens
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradients: the mean over ranks of the per-rank means
        optimizer.step()
        weights.append(_weights(model))
    return weights if every_step else weights[-1]


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().cpu().clone() for name, p in model.state_dict().items()}


def single_process_steps(make_model: Callable[[], nn.Module], batches: list[tuple[torch.Tensor, torch.Tensor]],
                         lr: float = 0.1, seed: int = 0, every_step: bool = False) -> dict[str, torch.Tensor] | list:
    """What :func:`data_parallel_steps` computes, in this process, without torch.distributed: the reference."""
    torch.manual_seed(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    weights = []
    for inputs, targets in batches:
        loss = F.cross_entropy(model(inputs).transpose(1, 2), targets)  # the mean over all tokens of the batch
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        weights.append(_weights(model))
    return weights if every_step else weights[-1]


def ring_all_reduce_bytes(n_values: int, world_size: int, bytes_per_value: int = 4) -> float:
    """Bytes each rank sends (and receives) in a ring all-reduce of ``n_values`` values: 2 (N - 1) / N of the data
    (a reduce-scatter, then an all-gather, each in N - 1 steps of 1/N of it)."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return 2 * (world_size - 1) / world_size * n_values * bytes_per_value


def zero_memory_per_device(n_parameters: float, world_size: int, stage: int,
                           bytes_per_parameter: dict[str, float] = ADAM_MIXED_BYTES) -> float:
    """Bytes of model states per device under plain data parallelism (stage 0) and ZeRO stages 1 (optimizer state
    sharded), 2 (+ gradients) and 3 (+ parameters; FSDP's full sharding), for mixed-precision Adam as Rajbhandari et
    al. count it (``ADAM_MIXED_BYTES``: 16-bit weights and gradients, 12 bytes of float32 optimizer state) or another
    split of the bytes (``ADAM_AUTOCAST_BYTES``: float32 weights and gradients under autocast, two float32 moments).
    Activations are not included."""
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    shard = {0: (), 1: ("optimizer",), 2: ("optimizer", "gradients"), 3: ("optimizer", "gradients", "parameters")}
    if set(bytes_per_parameter) != set(ADAM_MIXED_BYTES):
        raise ValueError(f"bytes_per_parameter needs the keys {sorted(ADAM_MIXED_BYTES)}, "
                         f"got {sorted(bytes_per_parameter)}")
    return sum(n_parameters * b / (world_size if part in shard[stage] else 1)
               for part, b in bytes_per_parameter.items())


def sharded_steps(rank: int, world_size: int, make_model: Callable[[], nn.Module],
                  batches: list[tuple[torch.Tensor, torch.Tensor]], lr: float = 0.1,
                  seed: int = 0) -> dict[str, Any]:
    """:func:`data_parallel_steps` with PyTorch's fully sharded data parallelism (FSDP2, ``fully_shard``, ZeRO stage 3)
    instead of DDP: each rank keeps 1/N of every parameter (a DTensor shard) and gathers the rest only while a layer
    runs. Returns the full final weights and the bytes of this rank's own shards (``"local_bytes"``) beside the bytes
    of the whole model (``"full_bytes"``)."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(seed)
    model = make_model()
    full_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    for module in model.modules():  # shard every layer of a decoder stack, then the rest of the model
        if module is not model and type(module).__name__.endswith("Layer"):
            fully_shard(module)
    fully_shard(model)
    local_bytes = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for inputs, targets in batches:
        rows = rank_slice(len(inputs), rank, world_size)
        loss = F.cross_entropy(model(inputs[rows]).transpose(1, 2), targets[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # reduce-scatters the gradients: each rank receives the average of its own shard
        optimizer.step()  # each rank updates its shard only
    weights = {name: p.full_tensor().detach().cpu().clone() for name, p in model.named_parameters()}
    return {"weights": weights, "local_bytes": local_bytes, "full_bytes": full_bytes}


def ring_all_reduce(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Sum ``tensor`` over all ranks by hand, the way a ring all-reduce does, with point-to-point messages only; return
    the sum and the bytes this rank sent. Each rank sends to the next rank of the ring and receives from the previous
    one. The tensor is cut into N chunks: in N - 1 steps of *reduce-scatter* every rank passes one chunk on and adds
    the chunk it receives to its own, until rank r holds the full sum of chunk r + 1; in N - 1 steps of *all-gather*
    the summed chunks travel once more around the ring. Each step sends 1/N of the data: 2 (N - 1) / N in all
    (:func:`ring_all_reduce_bytes`), whatever N is. Call it from a process group (:func:`spawn`)."""
    rank, n = dist.get_rank(), dist.get_world_size()
    flat = tensor.detach().flatten().clone()  # (numel,)
    chunks = list(flat.chunk(n)) if len(flat) >= n else [flat] + [flat[:0]] * (n - 1)  # views of flat
    sent = 0
    after, before = (rank + 1) % n, (rank - 1) % n

    def exchange(send_index: int, receive_index: int) -> torch.Tensor:
        nonlocal sent
        received = torch.empty_like(chunks[receive_index])
        request = dist.isend(chunks[send_index].contiguous(), after)
        dist.recv(received, before)
        request.wait()
        sent += chunks[send_index].numel() * chunks[send_index].element_size()
        return received

    for step in range(n - 1):  # reduce-scatter
        chunks[(rank - step - 1) % n] += exchange((rank - step) % n, (rank - step - 1) % n)
    for step in range(n - 1):  # all-gather: rank r starts with the full sum of chunk r + 1
        chunks[(rank - step) % n].copy_(exchange((rank + 1 - step) % n, (rank - step) % n))
    return flat.view_as(tensor), sent


def data_parallel_tour(rank: int, world_size: int, make_model: Callable[[], nn.Module],
                       batches: list[tuple[torch.Tensor, torch.Tensor]], lr: float = 0.1,
                       seed: int = 0) -> dict[str, Any]:
    """Chapter 16 in one process group (each :func:`spawn` costs a Python start-up per rank): DDP's weights after every
    step (:func:`data_parallel_steps`) and the bytes of gradients it hands to all-reduce per step, a hand-built
    :func:`ring_all_reduce` of a gradient-sized tensor against ``dist.all_reduce`` (its largest difference and the
    bytes it sent), the same training accumulated over micro-batches with and without DDP's ``no_sync``
    (the bytes each all-reduces), and the same training fully sharded (:func:`sharded_steps`)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel

    handed: list[int] = []

    def counting_hook(state, bucket):  # DDP's own all-reduce, after noting the bytes of each bucket of gradients
        handed.append(bucket.buffer().numel() * bucket.buffer().element_size())
        return allreduce_hook(state, bucket)

    torch.manual_seed(seed)
    model = make_model()
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(None, counting_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    weights, per_step = [], []
    for inputs, targets in batches:
        rows = rank_slice(len(inputs), rank, world_size)
        loss = F.cross_entropy(ddp(inputs[rows]).transpose(1, 2), targets[rows])
        optimizer.zero_grad(set_to_none=True)
        handed.clear()
        loss.backward()
        optimizer.step()
        weights.append(_weights(model))
        per_step.append(sum(handed))
    accumulated = _accumulated_under_ddp(rank, world_size, make_model, batches, lr, seed, counting_hook, handed)
    n_values = sum(p.numel() for p in model.parameters())
    local = torch.randn(n_values, generator=torch.Generator().manual_seed(seed + rank))  # (P,): differs per rank
    by_hand, sent = ring_all_reduce(local)
    reference = local.clone()
    dist.all_reduce(reference)
    return {"ddp": weights, "all_reduce_bytes": per_step, "n_values": n_values, "ring_bytes_sent": sent,
            "ring_max_difference": (by_hand - reference).abs().max().item(),
            "fsdp": sharded_steps(rank, world_size, make_model, batches, lr, seed), **accumulated}


def _accumulated_under_ddp(rank: int, world_size: int, make_model: Callable[[], nn.Module], batches: list,
                           lr: float, seed: int, hook: Callable, handed: list[int], accumulation: int = 2) -> dict:
    """:func:`tfm.train` on DDP with ``accumulation`` micro-batches of this rank's slice per step: the final weights
    and the bytes handed to all-reduce over the whole run (once a step: the other micro-batches run under no_sync);
    and the same steps without ``no_sync`` (an all-reduce in every micro-batch's backward pass): their weights and
    bytes (``accumulated_synced``, ``synced_all_reduce_bytes``)."""
    from torch.nn.parallel import DistributedDataParallel

    from .training import train

    torch.manual_seed(seed)
    model = make_model()
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(None, hook)
    micro = [part for inputs, targets in batches
             for part in zip(*(t[rank_slice(len(inputs), rank, world_size)].chunk(accumulation)
                               for t in (inputs, targets)), strict=True)]  # (B / N / k, T) pairs, in order
    steps = [micro[k:k + accumulation] for k in range(0, len(micro), accumulation)]
    handed.clear()
    train(ddp, lambda: micro.pop(0), lambda m, b: F.cross_entropy(m(b[0]).transpose(1, 2), b[1]),
          torch.optim.SGD(ddp.parameters(), lr=lr), len(batches), clip_norm=None, accumulation=accumulation,
          progress=False)
    with_no_sync = sum(handed)
    # the same steps without no_sync: every micro-batch's backward pass all-reduces the gradients
    torch.manual_seed(seed)
    synced = make_model()
    ddp = DistributedDataParallel(synced)
    ddp.register_comm_hook(None, hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    handed.clear()
    for step in steps:
        optimizer.zero_grad(set_to_none=True)
        for inputs, targets in step:
            (F.cross_entropy(ddp(inputs).transpose(1, 2), targets) / accumulation).backward()
        optimizer.step()
    return {"accumulated": _weights(model), "accumulated_all_reduce_bytes": with_no_sync,
            "accumulated_synced": _weights(synced), "synced_all_reduce_bytes": sum(handed),
            "accumulation": accumulation}
