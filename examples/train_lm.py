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
a k times smaller activation memory; under DDP only the last micro-batch of a step all-reduces, the others run
under no_sync); --autocast bf16 runs the forward passes in bfloat16. The training loss printed and logged (--log) is
the mean over all ranks, so it is the loss of the global batch whatever the number of processes.

--checkpoint PATH saves the weights, the optimiser's and the schedule's state, the batch generator's state and the
losses so far every --save-every steps (rank 0 writes it, atomically); run the same command again and it resumes
from there, with the loss curve an uninterrupted run gives (every rank reads it: across machines, put it on storage
they all see). --stop-after N ends the run after N steps, as a job
that is preempted would, to try it:

    python examples/train_lm.py --steps 300 --checkpoint run.pt --save-every 50 --stop-after 100
    python examples/train_lm.py --steps 300 --checkpoint run.pt --save-every 50     # steps 101-300
"""

from __future__ import annotations

import argparse
import json
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
    for name in ("save_every", "stop_after"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.save_every is not None and args.checkpoint is None:
        parser.error("--save-every needs --checkpoint PATH: where to save")
    if not args.lr > 0:
        parser.error(f"--lr must be positive, got {args.lr}")
    if args.autocast == "fp16" and not torch.cuda.is_available():
        parser.error("--autocast fp16 is for a CUDA GPU (on the CPU, float16 gains no speed and needs a gradient "
                     "scaler, which bfloat16 does not); use --autocast bf16 on the CPU")


RECIPE = ("steps", "batch", "length", "accumulation", "lr", "d_model", "layers", "merges", "autocast", "seed")
"""The arguments a checkpoint must have been made with to resume from it (the number of processes may change)."""


def mean_over_ranks(values: list[float], world_size: int, device: torch.device) -> list[float]:
    """Each rank's per-step losses averaged over the ranks (equal slices: the global batch's loss)."""
    if world_size == 1:
        return list(values)
    total = torch.tensor(values, dtype=torch.float64, device=device)  # (steps,)
    dist.all_reduce(total)  # the sum over ranks (gloo has no average)
    return (total / world_size).tolist()


def save(path: str, recipe: dict, done: int, losses: list[float], model, optimizer, scheduler, generator) -> None:
    """Everything the next steps depend on, written to a temporary file first: a job killed while saving leaves
    the previous checkpoint whole."""
    state = {"recipe": recipe, "step": done, "loss": losses, "model": model.state_dict(),
             "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "generator": generator.get_state()}
    torch.save(state, path + ".partial")
    os.replace(path + ".partial", path)


def resume(path: str, recipe: dict, model, optimizer, scheduler, generator) -> tuple[int, list[float]]:
    """Load a checkpoint of :func:`save` into the objects; refuse one made with other arguments."""
    state = torch.load(path, map_location=next(model.parameters()).device, weights_only=True)
    changed = [f"--{k.replace('_', '-')} {state['recipe'].get(k)} then, {recipe[k]} now" for k in recipe
               if state["recipe"].get(k) != recipe[k]]
    if changed:
        raise SystemExit(f"{path} was made with other arguments ({'; '.join(changed)}): resume with the same "
                         "ones, or give another --checkpoint")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    generator.set_state(state["generator"].cpu())
    return state["step"], state["loss"]


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
    parser.add_argument("--checkpoint", default=None, help="save the training state here; resume from it if present")
    parser.add_argument("--save-every", type=int, default=None, help="steps between checkpoints (default: 10 a run)")
    parser.add_argument("--stop-after", type=int, default=None, help="end after this many steps, as if preempted")
    parser.add_argument("--log", default=None, help="write the per-step training loss here as JSON (rank 0)")
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
    recipe = {name: getattr(args, name) for name in RECIPE}
    done, losses = 0, []
    if args.checkpoint and os.path.exists(args.checkpoint):
        done, losses = resume(args.checkpoint, recipe, model, optimizer, scheduler, generator)
        if rank == 0:
            print(f"resumed from {args.checkpoint} after step {done}")
    end = min(args.steps, args.stop_after or args.steps)
    every = args.save_every or max(1, args.steps // 10)
    started, first = time.perf_counter(), done  # a resumed run times only the steps it takes
    while done < end:
        chunk = min(end - done, every) if args.checkpoint else end - done
        history = tfm.train(trained, next_batch, loss_step, optimizer, chunk, scheduler=scheduler,
                            accumulation=args.accumulation, autocast=dtype, progress=rank == 0 and None)
        losses += mean_over_ranks(history["loss"], world_size, device)
        done += chunk
        if args.checkpoint and rank == 0:
            save(args.checkpoint, recipe, done, losses, model, optimizer, scheduler, generator)
    seconds = time.perf_counter() - started
    if rank == 0:
        if args.log:
            with open(args.log, "w") as log:
                json.dump({"step": list(range(1, len(losses) + 1)), "loss": losses}, log)
        if done < args.steps:
            print(f"stopped after step {done} of {args.steps} (training loss {losses[-1]:.4f}); run the same "
                  "command without --stop-after to resume")
        else:
            loss, _ = held_out_loss(model, data.held_out, args.length)
            print(f"{world_size} process(es), {args.steps} steps of {args.batch} windows of {args.length} tokens "
                  f"({done - first} of them in this run, {seconds:.1f} s): training loss {losses[-1]:.4f}, "
                  f"held-out loss {loss:.4f} nats per token "
                  f"(perplexity {torch.tensor(loss).exp():.1f})")
            if args.out:
                torch.save(model.state_dict(), args.out)
    if world_size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
