"""Training: label-smoothed cross-entropy (§5.4), the warmup learning-rate schedule (§5.3) and a small loop."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

PROGRESS_ENV_VAR = "TFM_PROGRESS"
"""``TFM_PROGRESS=0`` hides progress bars, ``TFM_PROGRESS=1`` shows them; unset, :func:`progress_enabled` decides."""


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against a target that puts 1 − ε on the right token and spreads ε over the whole vocabulary.

    loss = (1 − ε) · (−log p_y) + ε · mean_j(−log p_j), averaged over the positions whose target is not
    ``ignore_index``. Equals ``F.cross_entropy(..., label_smoothing=ε)``.
    """

    def __init__(self, smoothing: float = 0.1, ignore_index: int | None = None):
        super().__init__()
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must lie in [0, 1), got {smoothing}")
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        """``logits (..., n_vocab)`` (raw scores, **not** softmax outputs) and ``target (...)`` -> scalar loss."""
        if logits.shape[:-1] != target.shape:
            raise ValueError(
                f"logits {tuple(logits.shape)} must be target {tuple(target.shape)} plus a vocabulary dimension"
            )
        log_probs = F.log_softmax(logits.float(), dim=-1).flatten(0, -2)  # (N, n_vocab)
        target = target.flatten()  # (N,)
        keep = torch.ones_like(target, dtype=torch.bool) if self.ignore_index is None else target != self.ignore_index
        safe_target = target.masked_fill(~keep, 0)
        nll = -log_probs.gather(-1, safe_target[:, None]).squeeze(-1)  # (N,)
        uniform = -log_probs.mean(-1)  # (N,)
        loss = (1.0 - self.smoothing) * nll + self.smoothing * uniform
        return (loss * keep).sum() / keep.sum().clamp(min=1)


def noam_rate(step: int, d_model: int, warmup: int) -> float:
    """lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), with step counted from 1 (§5.3)."""
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1, got {warmup}")
    step = max(step, 1)
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_scheduler(optimizer: torch.optim.Optimizer, d_model: int, warmup: int,
                   factor: float = 1.0) -> torch.optim.lr_scheduler.LambdaLR:
    """A scheduler that sets the learning rate to ``factor · noam_rate(step)``; build the optimizer with lr=1."""
    for group in optimizer.param_groups:
        if group["lr"] != 1.0:
            raise ValueError(f"build the optimizer with lr=1.0 so that the schedule sets the rate, got {group['lr']}")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: factor * noam_rate(i + 1, d_model, warmup))


# Set by test runners and CI services; a progress bar there only ends up in logs and stored notebook outputs.
_UNWATCHED_ENV_VARS = ("CI", "PYTEST_VERSION", "PYTEST_CURRENT_TEST")


def progress_enabled() -> bool:
    """Whether :func:`train` shows a progress bar by default: only when a person is likely to be watching.

    ``TFM_PROGRESS=0`` or ``=1`` decides outright. Otherwise no bar under a test runner or CI (pytest and nbval, which
    runs its kernels under pytest, set ``PYTEST_VERSION``; CI services set ``CI``), a bar in a Jupyter or Colab
    kernel, and elsewhere a bar only when stderr is a terminal.
    """
    setting = os.environ.get(PROGRESS_ENV_VAR)
    if setting is not None:
        return setting.strip().lower() not in ("0", "false", "no", "off", "")
    if any(name in os.environ for name in _UNWATCHED_ENV_VARS):
        return False
    if _in_notebook_kernel():
        return True
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def _in_notebook_kernel() -> bool:
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    # Jupyter's kernel shell, and Colab's, which subclasses it; not the terminal IPython shell
    return ip is not None and any(cls.__name__ == "ZMQInteractiveShell" for cls in type(ip).__mro__)


AUTOCAST_DTYPES = {"cpu": (torch.bfloat16, torch.float16), "cuda": (torch.float16, torch.bfloat16),
                   "mps": (torch.float16, torch.bfloat16)}
"""The low-precision dtypes autocast supports per device type (PyTorch only warns, and trains in float32, otherwise)."""


def check_autocast(device: torch.device, dtype: torch.dtype | None) -> None:
    """Raise a clear error unless ``dtype`` is None or an autocast dtype of ``device`` (bfloat16 on CUDA only where the
    GPU supports it)."""
    if dtype is None:
        return
    allowed = AUTOCAST_DTYPES.get(device.type, ())
    if dtype not in allowed:
        raise ValueError(f"autocast on {device.type} supports {[str(d) for d in allowed] or 'no dtype'}, got {dtype}")
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise ValueError("this GPU does not support bfloat16: use torch.float16 (with a gradient scaler)")


def train(model: nn.Module, next_batch: Callable[[], tuple], loss_step: Callable[[nn.Module, tuple], Tensor],
          optimizer: torch.optim.Optimizer, steps: int, scheduler=None, clip_norm: float | None = 1.0,
          time_limit: float | None = None, progress: bool | None = None,
          evaluate: Callable[[nn.Module], float] | None = None, eval_every: int = 50, accumulation: int = 1,
          items: Callable[[tuple], int] | None = None, autocast: torch.dtype | None = None,
          stop_when: Callable[[dict[str, list[float]]], bool] | None = None) -> dict[str, list[float]]:
    """Run ``steps`` optimisation steps; return ``{"loss": [...], "lr": [...], "seconds": [...]}`` per step.

    ``next_batch()`` returns a batch, ``loss_step(model, batch)`` returns the scalar loss. The gradient's global norm
    is clipped to ``clip_norm`` before each step (``None`` turns clipping off): a rare large gradient then moves the
    weights no further than an ordinary one. ``time_limit`` (seconds) stops early. ``stop_when(history)``, if given,
    is called after every step with the history so far and stops the training when it returns True (e.g. once the
    loss has stayed low for a few steps: a run that has learned need not use up its steps). A text progress bar
    (stderr) is shown when :func:`progress_enabled`.

    ``evaluate(model)``, if given, returns a held-out loss; it is called in eval mode without gradients before the
    first step, every ``eval_every`` steps and after the last, and recorded in ``history["eval_step"]`` (the number
    of steps taken) and ``history["eval_loss"]``. It must not draw from the training's random generators.

    ``accumulation=k`` makes each step from k batches (micro-batches), gradients summed before the update. Without
    ``items``, the k losses (each a mean over its batch) are averaged: equal to one k times larger batch only when
    every micro-batch holds as many items. With ``items(batch)`` (e.g. the number of real, unpadded target tokens),
    ``loss_step`` returns the *sum* over its batch's items and the step's loss is the sum over all k micro-batches
    divided by their total items: the per-item mean of the big batch, exactly. ``autocast`` (e.g. ``torch.bfloat16``)
    runs the forward passes under :func:`torch.autocast` on the model's device; float16 adds a gradient scaler (on
    CUDA and on the CPU alike: small gradients underflow in float16 wherever it runs). The loss recorded is the
    step's loss (under DDP, this rank's). A model wrapped in ``DistributedDataParallel`` all-reduces its gradients
    once per step, in the last micro-batch's backward: the others run under its ``no_sync()``.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    if isinstance(accumulation, bool) or not isinstance(accumulation, int) or accumulation < 1:
        raise ValueError(f"accumulation must be a positive int (micro-batches per step), got {accumulation!r}")
    device = next(model.parameters()).device
    check_autocast(device, autocast)
    scaler = torch.amp.GradScaler(device.type) if autocast == torch.float16 and device.type in ("cuda", "cpu") else None
    show = progress_enabled() if progress is None else progress
    history: dict[str, list[float]] = {"loss": [], "lr": [], "seconds": []}
    if evaluate is not None:
        history.update(eval_step=[], eval_loss=[])
        _record_evaluation(model, evaluate, history, 0)
    model.train()
    started = time.perf_counter()
    for step in _progress(range(steps), show):
        batches = [next_batch() for _ in range(accumulation)]
        total_items = sum(items(b) for b in batches) if items is not None else None
        if total_items is not None and total_items < 1:
            raise ValueError(f"the {accumulation} micro-batches of step {step} hold no items to average over")
        optimizer.zero_grad(set_to_none=True)
        step_loss = 0.0
        for k, batch in enumerate(batches):
            # under DDP, only the last micro-batch's backward all-reduces: the others add to the local gradients
            skip_sync = k < len(batches) - 1 and hasattr(model, "no_sync")
            with model.no_sync() if skip_sync else contextlib.nullcontext():
                with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
                    loss = loss_step(model, batch)
                loss = loss / (total_items if total_items is not None else accumulation)  # this batch's share
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"the loss became {loss.item()} at step {step}")
                (scaler.scale(loss) if scaler is not None else loss).backward()
            step_loss += loss.item()
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        if clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        history["lr"].append(optimizer.param_groups[0]["lr"])
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if scheduler is not None:
            scheduler.step()
        history["loss"].append(step_loss)
        history["seconds"].append(time.perf_counter() - started)
        stop = ((time_limit is not None and history["seconds"][-1] > time_limit)
                or (stop_when is not None and bool(stop_when(history))))
        if evaluate is not None and ((step + 1) % eval_every == 0 or step + 1 == steps or stop):
            _record_evaluation(model, evaluate, history, step + 1)
            model.train()
        if stop:
            break
    model.eval()
    return history


def _record_evaluation(model: nn.Module, evaluate: Callable[[nn.Module], float], history: dict, step: int) -> None:
    model.eval()
    with torch.no_grad():
        value = float(evaluate(model))
    history["eval_step"].append(step)
    history["eval_loss"].append(value)


def _progress(iterable: range, show: bool) -> Iterator[int]:
    if not show:
        return iter(iterable)
    from tqdm import tqdm  # text bar on stderr: works in a terminal, Jupyter and Colab without widgets

    return iter(tqdm(iterable, file=sys.stderr, mininterval=0.5, leave=False))
