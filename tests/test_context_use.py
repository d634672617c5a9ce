"""tfm.context_use: the context-swap control and the induction oracle, against hand-made cases, brute force and the
exact property of a count model (no rise once the kept text covers its history)."""

import pytest
import torch
from torch import nn

from tfm.context_use import context_swap_rise, context_swap_rows, induction_oracle, model_row_losses, swapped
from tfm.kneser_ney import ModifiedKneserNey


def test_swapped_replaces_exactly_what_lies_before_the_kept_text():
    rows = torch.arange(10).repeat(2, 1)  # (2, 10)
    donors = torch.full((2, 10), -1)
    out = swapped(rows, donors, keep=3, scored=2)
    # The last 2 predictions (of ids 8 and 9) see at least 3 ids of their own text: 5, 6, 7 (and 8 for id 9).
    assert out[0].tolist() == [-1, -1, -1, -1, -1, 5, 6, 7, 8, 9]
    assert rows[0, 0] == 0, "the input rows are left alone"
    assert torch.equal(swapped(rows, donors, keep=8, scored=2), rows)  # nothing left to swap
    assert swapped(rows, donors, keep=7, scored=2)[0, 0] == -1  # id 0 is still read


def test_swapped_bad_input():
    rows = torch.zeros(2, 10, dtype=torch.long)
    with pytest.raises(ValueError, match=r"donors must have the rows' shape \(2, 10\)"):
        swapped(rows, torch.zeros(2, 9, dtype=torch.long), 1, 1)
    with pytest.raises(ValueError, match="keep \\+ scored <= L = 10"):
        swapped(rows, rows, keep=9, scored=2)
    with pytest.raises(ValueError, match="scored >= 1"):
        swapped(rows, rows, keep=1, scored=0)
    with pytest.raises(ValueError, match=r"shape \(n, L\)"):
        swapped(torch.zeros(10, dtype=torch.long), rows, 1, 1)


def test_a_count_model_gains_nothing_from_text_beyond_its_history():
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, 6, (4000,), generator=g)
    stream[1::3] = (stream[0::3][: len(stream[1::3])] + 1) % 6  # some structure to count
    mkn = ModifiedKneserNey(4, 6).fit(stream[:3000])
    rows = stream[3000:].reshape(-1, 25)  # (40, 25)
    donors = rows.roll(20, 0)
    rise = context_swap_rise(mkn.row_losses, rows, donors, keeps=[0, 1, 2, 3, 5], scored=4)
    assert rise[3] == 0.0 and rise[5] == 0.0, rise  # 3 ids of history: everything a 4-gram reads
    assert rise[0] != 0.0 and rise[1] != 0.0, rise
    rows_rise = context_swap_rows(mkn.row_losses, rows, donors, keeps=[0, 3], scored=4)
    assert rows_rise[0].shape == (40,) and torch.all(rows_rise[3] == 0)
    assert abs(rows_rise[0].mean().item() - rise[0]) < 1e-12


class LastTokenModel(nn.Module):
    """Logits from the current token only: a model whose context is one id."""

    def __init__(self, n_vocab: int):
        super().__init__()
        self.table = nn.Embedding(n_vocab, n_vocab)

    def forward(self, ids):  # (B, T) -> (B, T, n_vocab)
        return self.table(ids)


def test_model_row_losses_and_the_swap_boundary():
    torch.manual_seed(0)
    model = LastTokenModel(7)
    rows = torch.randint(0, 7, (9, 12))  # (9, 12)
    losses = model_row_losses(model, rows, batch=4)
    assert losses.shape == (9, 11)
    by_hand = -torch.log_softmax(model.table.weight[rows[0, 3]], -1)[rows[0, 4]]
    assert torch.allclose(losses[0, 3], by_hand.detach())
    rise = context_swap_rise(lambda r: model_row_losses(model, r), rows, rows.roll(4, 0), keeps=[0, 1, 8], scored=3)
    assert rise[1] == 0.0 and rise[8] == 0.0, rise  # it reads one id: keeping one is keeping all it uses
    assert rise[0] != 0.0, rise  # keep 0: the first scored prediction's own input is swapped


def brute_force_oracle(row: list[int], n: int) -> tuple[list[bool], list[int]]:
    fires, guess = [], []
    for t in range(len(row) - 1):
        hit = -1
        if t >= n - 1:
            for j in range(t - 1, n - 2, -1):
                if row[j - n + 1 : j + 1] == row[t - n + 1 : t + 1]:
                    hit = row[j + 1]
                    break
        fires.append(hit != -1)
        guess.append(hit)
    return fires, guess


def test_induction_oracle_by_hand_and_against_brute_force():
    fires, guess = induction_oracle(torch.tensor([[1, 2, 3, 9, 1, 2, 7, 1, 2, 5]]), n=2)
    # (1, 2) ends at 1, then at 5 (guess 3, the id after its first end) and at 8 (guess 7, after the latest: 5).
    assert fires[0].nonzero().flatten().tolist() == [5, 8]
    assert guess[0, 5] == 3 and guess[0, 8] == 7 and guess[0, 0] == -1
    g = torch.Generator().manual_seed(1)
    rows = torch.randint(0, 4, (6, 40), generator=g)
    for n in (1, 2, 3):
        fires, guess = induction_oracle(rows, n)
        for r in range(len(rows)):
            want_fires, want_guess = brute_force_oracle(rows[r].tolist(), n)
            assert fires[r].tolist() == want_fires and guess[r].tolist() == want_guess, (n, r)


def test_induction_oracle_bad_input():
    with pytest.raises(ValueError, match=r"n must lie in \[1, L - 2 = 8\]"):
        induction_oracle(torch.zeros(2, 10, dtype=torch.long), 9)
    with pytest.raises(ValueError, match="got 0"):
        induction_oracle(torch.zeros(2, 10, dtype=torch.long), 0)
