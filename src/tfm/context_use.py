"""How far back a language model of real text looks: the context-swap control and an induction oracle.

The loss by position (:func:`tfm.incontext.loss_by_position`) averages over whole ranges of positions and mixes the use
of far context with how hard the text at those positions happens to be. Two sharper measurements:

- **Context swap.** Keep only the last ``keep`` ids before a scored span of a window and replace everything earlier by
  unrelated text (another document's window): the rise of the loss on the span is what the model got from text more
  than ``keep`` ids back (:func:`context_swap_rise`). A count model of order n gets nothing from there once
  ``keep >= n - 1``: its rise is exactly zero.
- **Induction oracle.** At each position, look for an earlier occurrence, in the same window, of the ``n`` ids that
  end there; if there is one, guess the id that followed its latest occurrence (:func:`induction_oracle`). How often
  it fires and how often it is right say how much a perfect induction head could gain on this text; the model's loss
  where it fires says how much of that the model takes.

Rows are windows of ``L = T + 1`` ids: position t of a row's ``L - 1`` losses predicts ``rows[:, t + 1]`` from
``rows[:, : t + 1]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .lm import token_losses


def _check_rows(rows: Tensor, name: str = "rows") -> None:
    if rows.dim() != 2 or rows.shape[1] < 2:
        raise ValueError(f"{name} must have shape (n, L) with L >= 2 (inputs and the next id), got "
                         f"{tuple(rows.shape)}")


@torch.no_grad()
def model_row_losses(model: nn.Module, rows: Tensor, batch: int = 64) -> Tensor:
    """Cross-entropy (nats) of each next id of each row under ``model``: ``rows (n, L)`` -> ``(n, L - 1)``, on the
    CPU. The model sees each row on its own, as a count model's :meth:`row_losses` does."""
    _check_rows(rows)
    return token_losses(model, rows[:, :-1], rows[:, 1:], batch)  # (n, L - 1)


def swapped(rows: Tensor, donors: Tensor, keep: int, scored: int) -> Tensor:
    """A copy of ``rows`` whose ids before the last ``keep + scored`` come from ``donors`` (same shape): the last
    ``scored`` predictions of a row then see at least ``keep`` ids of its own text, and nothing of it further back."""
    _check_rows(rows)
    if donors.shape != rows.shape:
        raise ValueError(f"donors must have the rows' shape {tuple(rows.shape)}, got {tuple(donors.shape)}")
    length = rows.shape[1]
    if scored < 1 or keep < 0 or keep + scored > length:
        raise ValueError(f"need scored >= 1, keep >= 0 and keep + scored <= L = {length}, got keep={keep}, "
                         f"scored={scored}")
    out = rows.clone()
    cut = length - scored - keep  # ids before this index are replaced
    out[:, :cut] = donors[:, :cut]
    return out


def context_swap_rows(row_losses: Callable[[Tensor], Tensor], rows: Tensor, donors: Tensor, keeps: Sequence[int],
                      scored: int) -> dict[int, Tensor]:
    """:func:`context_swap_rise` row by row: for each ``keep``, the rise of each row's mean loss over its last
    ``scored`` predictions, ``(n,)`` float64 (for an interval over rows, e.g. a bootstrap)."""
    intact = row_losses(rows)[:, -scored:].double().mean(1)  # (n,)
    return {keep: row_losses(swapped(rows, donors, keep, scored))[:, -scored:].double().mean(1) - intact
            for keep in keeps}


def context_swap_rise(row_losses: Callable[[Tensor], Tensor], rows: Tensor, donors: Tensor, keeps: Sequence[int],
                      scored: int) -> dict[int, float]:
    """For each ``keep``: the mean loss of the last ``scored`` predictions of every row when everything before their
    last ``keep`` ids of context is swapped for the donors' text, minus the same mean on the intact rows (nats).
    ``row_losses`` maps rows ``(n, L)`` to losses ``(n, L - 1)``: :func:`model_row_losses` bound to a model, or a count
    model's ``row_losses``. Positive: the model used text from further back than ``keep``."""
    return {keep: rise.mean().item()
            for keep, rise in context_swap_rows(row_losses, rows, donors, keeps, scored).items()}


def induction_oracle(rows: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """The guess of a perfect induction head that matches ``n`` ids: ``rows (r, L)`` -> ``fires (r, L - 1)`` (bool)
    and ``guess (r, L - 1)`` (the guessed next id, -1 where it does not fire).

    Position t fires when the ``n`` ids ending at t (``rows[:, t - n + 1 : t + 1]``) also end at an earlier position
    j < t of the same row; it guesses ``rows[:, j + 1]`` for the latest such j."""
    _check_rows(rows)
    length = rows.shape[1]
    if not 1 <= n < length - 1:
        raise ValueError(f"n must lie in [1, L - 2 = {length - 2}] (a match needs room before it), got {n}")
    ids = rows.cpu().long()
    fires = torch.zeros(len(ids), length - 1, dtype=torch.bool)
    guess = torch.full((len(ids), length - 1), -1, dtype=torch.long)
    grams = ids.unfold(1, n, 1)  # (r, L - n + 1, n): gram i ends at position i + n - 1
    for row in range(len(ids)):
        latest: dict[tuple[int, ...], int] = {}  # gram -> the latest position it ended at
        keys = [tuple(g) for g in grams[row].tolist()]
        for i, key in enumerate(keys[: length - n]):  # grams ending at t = i + n - 1 <= L - 2
            t = i + n - 1
            j = latest.get(key)
            if j is not None:
                fires[row, t] = True
                guess[row, t] = ids[row, j + 1]
            latest[key] = t
    return fires, guess
