"""tfm.distributed and tfm.train's accumulation and autocast: two gloo processes under DistributedDataParallel take
exactly the steps of one process on the combined batch; k micro-batches equal one batch k times larger (per item,
also when they hold different numbers of real tokens); the memory and traffic arithmetic; clear errors."""

from __future__ import annotations

import functools
import os

import pytest
import torch
import torch.nn.functional as F

import tfm
from tfm.distributed import (
    ADAM_AUTOCAST_BYTES,
    data_parallel_steps,
    data_parallel_tour,
    rank_slice,
    ring_all_reduce_bytes,
    single_process_steps,
    spawn,
    zero_memory_per_device,
)


def tiny_lm() -> torch.nn.Module:
    return tfm.CausalLM(20, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=16)


@pytest.fixture(scope="module")
def two_ranks():
    """DDP, a hand-built ring all-reduce and FSDP in one pair of processes (each spawn costs two Python start-ups)."""
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 20, (4, 8), generator=g), torch.randint(0, 20, (4, 8), generator=g))
               for _ in range(3)]
    return (spawn(data_parallel_tour, 2, tiny_lm, batches, backend="gloo"),
            single_process_steps(tiny_lm, batches, every_step=True))


def test_two_processes_under_ddp_equal_one_process_on_the_combined_batch_after_every_step(two_ranks):
    ranks, steps = two_ranks
    torch.manual_seed(0)
    initial = tiny_lm().state_dict()
    for step, one in enumerate(steps):
        ddp = [r["ddp"][step] for r in ranks]
        assert ddp[0].keys() == one.keys()
        for name in one:
            assert torch.equal(ddp[0][name], ddp[1][name]), f"step {step}, {name}: the ranks disagree"
            assert (ddp[0][name] - one[name]).abs().max() < 1e-6, f"step {step}, {name}: DDP differs from one process"
    assert any((initial[n] - steps[-1][n]).abs().max() > 1e-3 for n in initial), "no step was taken"


def test_ddp_all_reduces_the_gradient_and_a_ring_sends_2_n_minus_1_over_n_of_it(two_ranks):
    ranks, _ = two_ranks
    n_values = sum(p.numel() for p in tiny_lm().parameters())  # the tied output weight counts once
    for r in ranks:
        assert r["n_values"] == n_values
        assert r["all_reduce_bytes"] == [4 * n_values] * 3  # DDP's buckets: every float32 gradient, every step
        assert r["ring_bytes_sent"] == ring_all_reduce_bytes(n_values, 2)
        assert r["ring_max_difference"] <= 1e-6  # the hand-built ring's sum against dist.all_reduce


def test_accumulating_under_ddp_all_reduces_once_a_step_and_equals_the_big_batch(two_ranks):
    ranks, steps = two_ranks
    n_values = sum(p.numel() for p in tiny_lm().parameters())
    for r in ranks:  # 3 steps of 2 micro-batches: 3 all-reduces of every gradient, not 6 (no_sync)
        assert r["accumulated_all_reduce_bytes"] == 3 * 4 * n_values
        # without no_sync: an all-reduce in each of the 6 micro-batches' backward passes, to the same weights
        assert r["accumulation"] == 2 and r["synced_all_reduce_bytes"] == 6 * 4 * n_values
        for name, value in r["accumulated"].items():
            assert (r["accumulated_synced"][name] - value).abs().max() < 1e-6, f"{name}: no_sync changed the step"
        for name, value in steps[-1].items():
            assert (r["accumulated"][name] - value).abs().max() < 1e-6, f"{name}: accumulated DDP differs"


def test_fully_sharded_training_equals_one_process_and_halves_the_parameters_per_rank(two_ranks):
    ranks, steps = two_ranks
    one = steps[-1]
    for r in (rank["fsdp"] for rank in ranks):
        for name, weight in r["weights"].items():
            assert (weight - one[name]).abs().max() < 1e-6, f"{name}: FSDP differs from one process"
        # each rank holds half of every parameter (a dimension of odd size splits one row unevenly)
        assert abs(r["local_bytes"] - r["full_bytes"] / 2) <= 4 * 64, (r["local_bytes"], r["full_bytes"])


def test_rank_slices_cover_the_batch_and_refuse_uneven_splits():
    assert [rank_slice(6, r, 3) for r in range(3)] == [slice(0, 2), slice(2, 4), slice(4, 6)]
    with pytest.raises(ValueError, match="cannot be split among 4 ranks"):
        rank_slice(2, 0, 4)
    with pytest.raises(ValueError, match="does not split evenly"):
        rank_slice(5, 0, 2)
    with pytest.raises(ValueError, match="world_size must be a positive int"):
        spawn(data_parallel_steps, 0)


def _one_step(accumulation: int, batches: list, items=None, loss_step=None) -> dict:
    torch.manual_seed(0)
    model = tiny_lm()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    queue = iter(batches)
    tfm.train(model, lambda: next(queue), loss_step, optimizer, steps=1, clip_norm=None, accumulation=accumulation,
              items=items)
    return model.state_dict()


def _sum_loss(model, batch):  # the summed loss over real (non-padding, id != 0) target tokens
    x, y = batch
    return F.cross_entropy(model(x).transpose(1, 2), y, ignore_index=0, reduction="sum")


def _mean_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).transpose(1, 2), y, ignore_index=0)


def test_accumulation_equals_the_big_batch_per_token_and_the_pitfall_is_real():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(1, 20, (4, 8), generator=g)
    y = torch.randint(1, 20, (4, 8), generator=g)
    y[:2, 5:] = 0  # padding: the first two rows hold 5 real targets, the last two 8
    big = _one_step(1, [(x, y)], loss_step=_mean_loss)
    micro = [(x[:2], y[:2]), (x[2:], y[2:])]
    per_token = _one_step(2, micro, items=lambda b: int((b[1] != 0).sum()), loss_step=_sum_loss)
    per_batch = _one_step(2, micro, loss_step=_mean_loss)  # each micro-batch's mean, averaged: the pitfall
    assert max((big[n] - per_token[n]).abs().max() for n in big) < 1e-6
    assert max((big[n] - per_batch[n]).abs().max() for n in big) > 1e-4
    equal = [(x[:2], y[2:]), (x[2:], y[2:])]  # without padding the plain average is right too
    big_equal = _one_step(1, [(torch.cat([x[:2], x[2:]]), torch.cat([y[2:], y[2:]]))], loss_step=_mean_loss)
    assert max((big_equal[n] - _one_step(2, equal, loss_step=_mean_loss)[n]).abs().max() for n in big) < 1e-6


def test_autocast_runs_in_bfloat16_and_refuses_what_the_device_cannot_do():
    seen = []

    def loss_step(model, batch):
        x, y = batch
        logits = model(x)
        seen.append(logits.dtype)
        return F.cross_entropy(logits.transpose(1, 2).float(), y)

    model = tiny_lm()
    batch = (torch.randint(0, 20, (2, 8)), torch.randint(0, 20, (2, 8)))
    optimizer = torch.optim.Adam(model.parameters())
    tfm.train(model, lambda: batch, loss_step, optimizer, steps=1, autocast=torch.bfloat16)
    assert seen == [torch.bfloat16] and all(p.dtype == torch.float32 for p in model.parameters())  # master weights
    with pytest.raises(ValueError, match="autocast on cpu supports"):
        tfm.train(model, lambda: batch, loss_step, optimizer, steps=1, autocast=torch.float64)
    with pytest.raises(ValueError, match="accumulation must be a positive int"):
        tfm.train(model, lambda: batch, loss_step, optimizer, steps=1, accumulation=0)


def test_float16_gets_a_gradient_scaler_on_the_cpu_too(monkeypatch):
    made = []

    class Spy(torch.amp.GradScaler):
        def __init__(self, device, *args, **kwargs):
            made.append(device)
            super().__init__(device, *args, **kwargs)

    monkeypatch.setattr(torch.amp, "GradScaler", Spy)
    model = tiny_lm()
    batch = (torch.randint(0, 20, (2, 8)), torch.randint(0, 20, (2, 8)))
    loss_step = lambda m, b: F.cross_entropy(m(b[0]).transpose(1, 2).float(), b[1])  # noqa: E731
    tfm.train(model, lambda: batch, loss_step, torch.optim.SGD(model.parameters(), lr=0.1), steps=2,
              autocast=torch.float16)
    assert made == ["cpu"], "float16 without a gradient scaler: small gradients would underflow"
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_memory_and_traffic_arithmetic():
    assert ring_all_reduce_bytes(1_000, world_size=1) == 0
    assert ring_all_reduce_bytes(1_000, world_size=4, bytes_per_value=4) == 6_000  # 2 * 3/4 of 4,000 bytes
    psi = 7.5e9  # Rajbhandari et al.'s example: 7.5 B parameters on 64 devices
    assert [zero_memory_per_device(psi, 64, s) / 1e9 for s in (0, 1, 2, 3)] == pytest.approx(
        [120, 31.4, 16.6, 1.875], abs=0.05)
    with pytest.raises(ValueError, match="ZeRO stage"):
        zero_memory_per_device(psi, 8, 4)
    # chapter 16's autocast recipe: float32 weights and gradients (4 + 4), Adam's two float32 moments (8)
    autocast = [zero_memory_per_device(7e9, 8, s, ADAM_AUTOCAST_BYTES) / 1e9 for s in (0, 1, 2, 3)]
    assert autocast == pytest.approx([112, 63, 38.5, 14])
    with pytest.raises(ValueError, match="bytes_per_parameter needs the keys"):
        zero_memory_per_device(psi, 8, 1, {"weights": 4})


def test_spawned_failure_is_reported():
    with pytest.raises(Exception, match="terminated with the following error"):
        spawn(functools.partial(divmod, 1), 1, 0, backend="gloo")  # divmod(1, rank, world_size, 0): a TypeError


def test_the_launcher_runs_in_one_process_and_names_a_batch_it_cannot_split(tmp_path, monkeypatch, capsys):
    import runpy
    import sys
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[1] / "examples" / "train_lm.py")  # run here: no second start-up
    monkeypatch.setattr(sys, "argv", [script, "--steps", "2", "--length", "16", "--batch", "4", "--accumulation", "2",
                                      "--merges", "20", "--out", str(tmp_path / "w.pt")])
    runpy.run_path(script, run_name="__main__")
    assert "held-out loss" in capsys.readouterr().out
    assert (tmp_path / "w.pt").exists()
    monkeypatch.setattr(sys, "argv", [script, "--steps", "1", "--batch", "4", "--accumulation", "3"])
    with pytest.raises(SystemExit, match="do not split into 3 micro-batches"):
        runpy.run_path(script, run_name="__main__")


@pytest.mark.parametrize(("arguments", "message"), [
    (["--accumulation", "0"], "--accumulation must be at least 1, got 0"),
    (["--accumulation", "-1"], "--accumulation must be at least 1, got -1"),
    (["--steps", "0"], "--steps must be at least 1, got 0"),
    (["--d-model", "36"], "--d-model must be a multiple of 8"),
    (["--lr", "0"], "--lr must be positive"),
])
def test_the_launcher_refuses_bad_arguments_before_building_anything(arguments, message, monkeypatch, capsys):
    import runpy
    import sys
    from pathlib import Path

    import tfm.lm

    def built(*args, **kwargs):
        raise AssertionError("the corpus was built before the arguments were checked")

    monkeypatch.setattr(tfm.lm, "corpus_lm", built)
    script = str(Path(__file__).resolve().parents[1] / "examples" / "train_lm.py")
    monkeypatch.setattr(sys, "argv", [script, *arguments])
    with pytest.raises(SystemExit) as exit_status:
        runpy.run_path(script, run_name="__main__")
    assert exit_status.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="float16 autocast is allowed on a GPU")
def test_the_launcher_refuses_float16_on_the_cpu(monkeypatch, capsys):
    import runpy
    import sys
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[1] / "examples" / "train_lm.py")
    monkeypatch.setattr(sys, "argv", [script, "--autocast", "fp16"])
    with pytest.raises(SystemExit):
        runpy.run_path(script, run_name="__main__")
    assert "use --autocast bf16 on the CPU" in capsys.readouterr().err


def _launch(monkeypatch, capsys, *arguments: str) -> str:
    """examples/train_lm.py run in this process (no second start-up); what it printed."""
    import runpy
    import sys
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[1] / "examples" / "train_lm.py")
    monkeypatch.setattr(sys, "argv", [script, *arguments])
    runpy.run_path(script, run_name="__main__")
    return capsys.readouterr().out


SMALL_RUN = ("--steps", "6", "--length", "16", "--batch", "4", "--accumulation", "2", "--merges", "20")


def test_a_run_stopped_and_resumed_from_its_checkpoint_has_the_loss_curve_of_one_run(tmp_path, monkeypatch, capsys):
    import json

    straight = _launch(monkeypatch, capsys, *SMALL_RUN, "--log", str(tmp_path / "straight.json"))
    checkpoint = str(tmp_path / "run.pt")
    stopped = _launch(monkeypatch, capsys, *SMALL_RUN, "--checkpoint", checkpoint, "--save-every", "2",
                      "--stop-after", "3")
    assert "stopped after step 3 of 6" in stopped and "held-out" not in stopped
    resumed = _launch(monkeypatch, capsys, *SMALL_RUN, "--checkpoint", checkpoint, "--save-every", "2",
                      "--log", str(tmp_path / "resumed.json"))
    assert "resumed from" in resumed and "after step 3" in resumed
    one, two = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("straight", "resumed"))
    assert one["step"] == two["step"] == list(range(1, 7))
    assert one["loss"] == two["loss"]  # every step, to the last bit: weights, Adam, schedule and batches restored
    assert straight.split("held-out loss")[1] == resumed.split("held-out loss")[1]
    with pytest.raises(SystemExit, match=r"--lr 0.003 then, 0.001 now"):  # another recipe is refused by name
        _launch(monkeypatch, capsys, *SMALL_RUN, "--checkpoint", checkpoint, "--lr", "1e-3")


def _torchrun(*arguments: str):
    import subprocess
    import sys
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[1] / "examples" / "train_lm.py")
    command = [sys.executable, "-m", "torch.distributed.run", *arguments, script, *SMALL_RUN]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TFM_DEVICE": "cpu"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_on_one_machine_and_on_two_local_nodes_gives_the_loss_of_one_process(monkeypatch, capsys):
    """The launcher's documented commands: 2 processes on this machine, and the multi-node form (c10d rendezvous)
    with two "machines" started side by side here, each with one process."""
    one = _launch(monkeypatch, capsys, *SMALL_RUN)
    expected = one.split(": training loss")[1]
    local = _torchrun("--nproc_per_node=2", "--standalone")
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = [_torchrun("--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d", "--rdzv-id=test",
                       f"--rdzv-endpoint={endpoint}") for _ in range(2)]
    outputs = []
    for process in [local, *nodes]:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-2000:]
        outputs.append(out)
    assert one.startswith("1 process(es)")
    assert outputs[0].startswith("2 process(es)")
    printed = [out for out in outputs[1:] if "held-out" in out]
    assert len(printed) == 1 and printed[0].startswith("2 process(es)")  # one rank 0 over both nodes
    for out in (outputs[0], printed[0]):  # training and held-out loss of one process, to the printed digits
        assert out.split(": training loss")[1] == expected
