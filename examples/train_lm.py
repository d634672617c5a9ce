"""Train chapter 14's language model on the book's corpus, in one process or in many with torch.distributed.

    python examples/train_lm.py --steps 300                         # one process (CPU, or one GPU)
    torchrun --nproc_per_node=2 examples/train_lm.py --steps 300    # data parallel: 2 processes on this machine
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-id=run1 --rdzv-endpoint=HOST:29500 \
        examples/train_lm.py ...                                    # several machines: the same line on each

(Across machines the rendezvous must be c10d, with one --rdzv-id and HOST the address of one of the machines that
all can reach: with torchrun's default static rendezvous every machine would make itself node 0.)

Unchanged under torchrun: it reads RANK and WORLD_SIZE from the environment torchrun sets, joins the process group
(NCCL on CUDA GPUs, gloo on CPUs), and wraps the model in DistributedDataParallel. Every rank draws the same global
batch from the same seed and trains on its slice of it (--batch must split evenly among the ranks), so N processes
take the steps that one process takes on the whole batch; the script prints the same held-out loss either way (up to
float round-off). --accumulation k splits each rank's slice further into k micro-batches (the same steps again, with
a k times smaller activation memory); --autocast bf16 runs the forward passes in bfloat16.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tfm
from tfm.distributed import default_backend, rank_slice
from tfm.lm import corpus_lm, held_out_loss, random_windows


def refuse_bad_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exit with a message that names the argument and the allowed values (argparse's own error, status 2)."""
    for name, least in [("steps", 1), ("batch", 1), ("length", 2), ("accumulation", 1), ("d_model", 4),
                        ("layers", 1), ("merges", 0)]:
        if getattr(args, name) < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}, got {getattr(args, name)}")
    if args.d_model % 8:
        parser.error(f"--d-model must be a multiple of 8 (4 heads of an even width), got {args.d_model}")
    if not args.lr > 0:
        parser.error(f"--lr must be positive, got {args.lr}")
    if args.autocast == "fp16" and not torch.cuda.is_available():
        parser.error("--autocast fp16 needs a CUDA GPU (float16 training needs its gradient scaler there); "
                     "use --autocast bf16 on the CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=16, help="global batch: windows per step, over all ranks")
    parser.add_argument("--length", type=int, default=128, help="tokens per window")
    parser.add_argument("--accumulation", type=int, default=1, help="micro-batches per rank and step")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--merges", type=int, default=250, help="BPE merges of chapter 12's tokenizer")
    parser.add_argument("--autocast", choices=["bf16", "fp16"], default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="save the trained weights here (rank 0)")
    args = parser.parse_args()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    refuse_bad_arguments(parser, args)  # before anything is built or joined

    if world_size > 1:
        dist.init_process_group(default_backend(int(os.environ.get("LOCAL_WORLD_SIZE", world_size))))
    if torch.cuda.is_available():
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
        torch.cuda.set_device(device)  # NCCL's collectives run on the current device: one GPU per process
    else:
        device = tfm.get_device()
    rows = rank_slice(args.batch, rank, world_size)  # refuses a batch the ranks cannot share evenly
    if (rows.stop - rows.start) % args.accumulation:
        raise SystemExit(f"each rank's {rows.stop - rows.start} windows do not split into {args.accumulation} "
                         "micro-batches of equal size")

    data = corpus_lm(args.merges)
    tfm.seed_everything(args.seed)
    model = tfm.CausalLM(data.n_vocab, d_model=args.d_model, n_heads=4, n_layers=args.layers,
                         d_ff=4 * args.d_model, dropout=0.0, max_len=args.length).to(device)
    trained = torch.nn.parallel.DistributedDataParallel(model) if world_size > 1 else model
    generator = torch.Generator().manual_seed(args.seed)  # the same global batches on every rank
    micro = []

    def next_batch():
        if not micro:
            x, y = random_windows(data.train, args.length, args.batch, generator)  # (B, T) each: the global batch
            x, y = x[rows].to(device), y[rows].to(device)  # this rank's slice
            micro.extend(zip(x.chunk(args.accumulation), y.chunk(args.accumulation), strict=True))
        return micro.pop(0)

    def loss_step(m, batch):
        x, y = batch
        return F.cross_entropy(m(x).transpose(1, 2).float(), y)

    optimizer = torch.optim.AdamW(trained.parameters(), lr=args.lr, weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, args.lr, total_steps=args.steps, pct_start=0.1,
                                                    cycle_momentum=False)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, None: None}[args.autocast]
    started = time.perf_counter()
    tfm.train(trained, next_batch, loss_step, optimizer, args.steps, scheduler=scheduler,
              accumulation=args.accumulation, autocast=dtype, progress=rank == 0 and None)
    seconds = time.perf_counter() - started
    if rank == 0:
        loss, _ = held_out_loss(model, data.held_out, args.length)
        print(f"{world_size} process(es), {args.steps} steps of {args.batch} windows of {args.length} tokens in "
              f"{seconds:.1f} s: held-out loss {loss:.4f} nats per token (perplexity {torch.tensor(loss).exp():.1f})")
        if args.out:
            torch.save(model.state_dict(), args.out)
    if world_size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
