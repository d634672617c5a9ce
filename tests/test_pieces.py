"""Smaller pieces: device choice, seeding, data generation and batching, the training loop, plots, self-checks."""

from __future__ import annotations

import io
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

import tfm
from tfm.check import (
    PAGE_WIDTH,
    CheckFailed,
    check_answer,
    check_close,
    check_rows_sum_to_one,
    check_shape,
    learner_code,
)
from tfm.data import Vocab, date_pairs, make_batch, random_batches, reverse_pairs, split_pairs


def test_device_override_and_fallback(monkeypatch):
    monkeypatch.setenv("TFM_DEVICE", "cpu")
    assert tfm.get_device() == torch.device("cpu")
    monkeypatch.delenv("TFM_DEVICE")
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert tfm.get_device().type == expected
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            tfm.get_device("cuda")


def test_seed_everything_repeats_random_draws():
    tfm.seed_everything(3)
    a = torch.rand(3)
    tfm.seed_everything(3)
    assert torch.equal(a, torch.rand(3))


def test_vocab_round_trip_and_specials():
    vocab = Vocab("abc")
    ids = vocab.encode(list("cab"), bos=True, eos=True)
    assert ids[0] == vocab.bos_id and ids[-1] == vocab.eos_id
    assert vocab.decode(ids + [vocab.pad_id]) == list("cab")
    assert vocab.encode(["z"]) == [vocab.unk_id]


def test_date_pairs_are_correct_iso_dates():
    for src, tgt in date_pairs(200, seed=1):
        iso = "".join(tgt)
        year, month, day = iso.split("-")
        assert year in "".join(src) and str(int(day)) in "".join(src)
        assert tfm.data.MONTHS[int(month) - 1] in src


def test_split_keeps_test_sources_out_of_training():
    train, test = split_pairs(date_pairs(500, seed=0) + date_pairs(50, seed=0), 50)
    assert not {tuple(s) for s, _ in train} & {tuple(s) for s, _ in test}


def test_batches_are_shifted_and_padded():
    pairs = reverse_pairs(10, min_len=2, max_len=6)
    vocab = Vocab.from_sequences(s for s, _ in pairs)
    batch = make_batch(pairs[:4], vocab, vocab)
    assert batch.tgt_in.shape == batch.tgt_out.shape
    assert (batch.tgt_in[:, 0] == vocab.bos_id).all()
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])  # the decoder input is the target shifted right
    assert ((batch.tgt_out == vocab.eos_id).sum(1) == 1).all()
    first = next(random_batches(pairs, 3, vocab, vocab, seed=0))
    assert first.src.shape[0] == 3


def test_train_reduces_the_loss_and_reports_history():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history = tfm.train(model, lambda: (x, y), lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), optimizer, 50,
                        progress=False)
    assert len(history["loss"]) == 50 and history["loss"][-1] < history["loss"][0]
    with pytest.raises(FloatingPointError, match="the loss became nan"):
        tfm.train(model, lambda: (x, y), lambda m, b: torch.tensor(float("nan"), requires_grad=True), optimizer, 3,
                  progress=False)


def test_train_stops_when_asked_and_evaluates_where_it_stopped():
    """stop_when(history) is asked after every step; the run ends at the first True, with a last evaluation there,
    and the steps it did take are those of a run without stop_when."""
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randn(64, 1)

    def run(**kwargs):
        torch.manual_seed(1)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        return tfm.train(model, lambda: (x, y), lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), optimizer, 40,
                         progress=False, **kwargs)

    full = run()
    asked = []
    stopped = run(stop_when=lambda h: asked.append(len(h["loss"])) or len(h["loss"]) >= 7,
                  evaluate=lambda m: 0.0, eval_every=5)
    assert asked == list(range(1, 8)) and len(stopped["loss"]) == 7
    assert stopped["loss"] == full["loss"][:7]
    assert stopped["eval_step"] == [0, 5, 7]
    never = run(stop_when=lambda h: False)
    assert never["loss"] == full["loss"]


def test_train_records_held_out_loss_without_changing_the_training():
    """Evaluation runs in eval mode without gradients, at step 0, every eval_every steps and after the last step,
    and leaves the training itself bit for bit as it was."""
    data = torch.Generator().manual_seed(1)
    w = torch.randn(4, 1, generator=data)  # (4, 1): the relation both sets share
    x, held_x = torch.randn(64, 4, generator=data), torch.randn(32, 4, generator=data)  # (64, 4), (32, 4)
    y, held_y = x @ w, held_x @ w  # (64, 1), (32, 1)

    def run(evaluate):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        history = tfm.train(model, lambda: (x, y), lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), optimizer, 25,
                            progress=False, evaluate=evaluate, eval_every=10)
        return model, history

    modes = []

    def held_out(model):
        modes.append((model.training, torch.is_grad_enabled()))
        return ((model(held_x) - held_y) ** 2).mean()

    plain, _ = run(None)
    evaluated, history = run(held_out)
    assert history["eval_step"] == [0, 10, 20, 25]
    assert len(history["eval_loss"]) == 4 and history["eval_loss"][-1] < history["eval_loss"][0]
    assert modes == [(False, False)] * 4
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), evaluated.parameters(), strict=True))
    with pytest.raises(ValueError, match="eval_every must be >= 1, got 0"):
        tfm.train(plain, lambda: (x, y), lambda m, b: m(b[0]).mean(), torch.optim.SGD(plain.parameters(), lr=0.1), 2,
                  evaluate=held_out, eval_every=0, progress=False)
    ax = tfm.viz.plot_curves(history, smooth=5)
    assert [line.get_label() for line in ax.get_lines()] == ["training (mean of 5 steps)", "held-out"]
    assert ax.get_lines()[1].get_xdata().tolist() == [0, 10, 20, 25]
    with pytest.raises(ValueError, match="non-empty 'loss'"):
        tfm.viz.plot_curves({"loss": []})


def test_progress_bar_follows_the_environment(monkeypatch):
    monkeypatch.setenv("TFM_PROGRESS", "0")
    assert not tfm.training.progress_enabled()
    monkeypatch.setenv("TFM_PROGRESS", "1")
    assert tfm.training.progress_enabled()


def test_no_progress_bar_under_a_test_runner_or_ci(monkeypatch):
    """No bar when nobody watches, whoever runs the notebooks: pytest/nbval (PYTEST_VERSION), CI, a pipe."""
    monkeypatch.delenv("TFM_PROGRESS", raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert "PYTEST_VERSION" in os.environ  # pytest sets it, and nbval's kernels inherit it
    assert not tfm.training.progress_enabled()
    monkeypatch.delenv("PYTEST_VERSION")
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    monkeypatch.setenv("CI", "true")
    assert not tfm.training.progress_enabled()
    monkeypatch.delenv("CI")
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal, not a notebook kernel
    assert not tfm.training.progress_enabled()
    monkeypatch.setattr(tfm.training, "_in_notebook_kernel", lambda: True)  # Jupyter or Colab: a person watches
    assert tfm.training.progress_enabled()


def test_plots_label_their_axes():
    ax = tfm.viz.plot_attention(torch.rand(2, 3).softmax(-1), ["a", "b"], ["x", "y", "z"], title="t")
    assert ax.get_xlabel() and ax.get_ylabel() and [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    fig = tfm.viz.plot_heads(torch.rand(3, 2, 2).softmax(-1), ["a", "b"], ncols=2)
    assert [ax.get_title() for ax in fig.axes[:3]] == ["head 0", "head 1", "head 2"]
    assert len(fig.axes) == 4  # 2 x 2 grid, no colour bar by default
    fig = tfm.viz.plot_heads(torch.rand(3, 2, 2).softmax(-1), ["a", "b"], ncols=3, colorbar=True)
    assert len(fig.axes) == 4 and fig.axes[-1].get_ylabel() == "attention weight"  # 3 heads + the shared bar
    weights = torch.tensor([[[0.25, 0.75], [1.0, 0.0]]])  # (h=1, T=2, S=2)
    fig = tfm.viz.plot_heads(weights, ["a", "b"], annotate=True, fontsize=11)
    assert [t.get_text() for t in fig.axes[0].texts] == ["0.25", "0.75", "1.00", "0.00"]  # row by row
    assert fig.axes[0].get_xticklabels()[0].get_fontsize() == 11


def test_self_checks_say_what_is_wrong(capsys):
    check_close(torch.ones(2), torch.ones(2), name="x")
    assert "✓ x matches" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"has shape \(3,\) but should have shape \(2,\)"):
        check_shape(torch.ones(3), (2,), name="x")
    with pytest.raises(CheckFailed, match=r"largest difference is 0\.5 at index \(1,\): got 1\.5, expected 1"):
        check_close(torch.tensor([1.0, 1.5]), torch.ones(2))
    with pytest.raises(CheckFailed, match="contains NaN"):
        check_close(torch.tensor([float("nan")]), torch.ones(1))
    with pytest.raises(CheckFailed, match="sums to 2"):
        check_rows_sum_to_one(torch.ones(2, 2))


def test_learner_code_turns_the_learner_s_errors_into_check_failures():
    def stub():
        raise NotImplementedError("your code here")

    with pytest.raises(CheckFailed, match="fixed is not written yet"), learner_code("fixed"):
        stub()
    with pytest.raises(CheckFailed, match="fixed raised ZeroDivisionError: division by zero"), learner_code("fixed"):
        _ = 1 / 0
    with pytest.raises(CheckFailed, match="fixed raised NameError: name 'undefined_name' is not defined \\(a typo"), \
            learner_code("fixed"):
        eval("undefined_name")
    with pytest.raises(CheckFailed, match="^the original$"), learner_code("fixed"):
        raise CheckFailed("the original")  # a failing check passes through unchanged
    with learner_code("fixed"):  # no error: nothing happens
        pass
    # Jupyter shows only the message, wrapped, not a traceback through tfm
    lines = CheckFailed("x " * 80)._render_traceback_()
    assert lines[0].startswith("CheckFailed: x") and len(lines) == 3 and max(map(len, lines)) <= PAGE_WIDTH


def test_check_answer_wants_the_exact_answer(capsys):
    for unanswered in (None, ...):
        with pytest.raises(CheckFailed, match="n is not answered yet"):
            check_answer(unanswered, 3, name="n")
    with pytest.raises(CheckFailed, match="n = 4 is not right: count the biases"):
        check_answer(4, 3, name="n", hint="count the biases")
    with pytest.raises(CheckFailed, match="n = 4 is not right"):
        check_answer(4, 3, name="n", quiet=True)  # quiet silences success only
    capsys.readouterr()
    check_answer(3, 3, name="n", quiet=True)
    assert capsys.readouterr().out == ""
    with pytest.raises(CheckFailed, match=r"n = \(2, 4\) is not right"):
        check_answer((2, 4), (2, 3), name="n")
    with pytest.raises(CheckFailed, match="is not right"):
        check_answer(0.5001, 0.5, name="p")
    check_answer([2, 3], (2, 3), name="shape")
    check_answer(0.5 + 1e-9, 0.5, name="p")
    check_answer(torch.tensor([0.67, 0.24]), (0.67, 0.24), name="w", atol=0.005)  # a tensor, float32 noise
    assert capsys.readouterr().out == ("✓ shape = [2, 3] is right\n✓ p = 0.500000001 is right\n"
                                       "✓ w = (0.6700000166893005, 0.23999999463558197) is right\n")
    with pytest.raises(CheckFailed, match="close: give it to within 0.005"):
        check_answer((0.68, 0.24), (0.665, 0.24), name="w", atol=0.005, hint="did you divide by sqrt(d_k)?")
    with pytest.raises(CheckFailed, match="did you divide by sqrt"):
        check_answer((0.87, 0.12), (0.67, 0.24), name="w", atol=0.005, hint="did you divide by sqrt(d_k)?")
    with pytest.raises(CheckFailed, match="is not right"):
        check_answer((0.67,), (0.67, 0.24), name="w", atol=0.005)


def test_check_answer_names_the_kind_it_wanted_and_the_one_it_got():
    """An answer of the wrong kind (text for a number) is told both kinds, and nothing about the value: not the hint,
    which may come close to giving the answer."""
    cases = [("relu", 1050624, "n should be a whole number (an int), but it is text (a str): 'relu'"),
             ("1050624", 1050624, "'1050624': write it without quotes"),
             ("0.5", 0.5, "a number (an int or a float), but it is text"),
             (True, 3, "n should be a whole number (an int), but it is a bool: True"),
             ([1, 2], 3, "but it is a list: [1, 2]"),
             ("2, 3", (2, 3), "2 values (a tuple, a list or a tensor), but it is text (a str): '2, 3': write the "
                              "values without quotes"),
             (4, (2, 3), "but it is an int: 4"),
             (len, 3, "but it is a builtin_function_or_method"),
             ("the biases of the four projections, and the four weight matrices", 1050624,
              "'the biases of the four projections, ...")]
    for got, expected, message in cases:
        with pytest.raises(CheckFailed, match=re.escape(message)) as failed:
            check_answer(got, expected, name="n", hint="count the biases")
        told = str(failed.value).replace(repr(got), "")
        assert "count the biases" not in told and str(expected) not in told, told
    check_answer(1, True, name="b")  # what compared equal before still does
    check_answer(3.0, 3, name="n")
    with pytest.raises(CheckFailed, match="n = 4 is not right: count the biases"):
        check_answer(4, 3, name="n", hint="count the biases")  # a number: the hint, as before


def test_schematics_ship_with_tfm():
    names = tfm.viz.schematic_names()
    assert {"qkv_flow", "head_split", "mask_pipeline"} <= set(names)
    figure = tfm.viz.schematic("head_split")
    assert figure.data.lstrip().startswith("<svg")
    with pytest.raises(ValueError, match="no schematic named 'nope'; the schematics are"):
        tfm.viz.schematic("nope")


def test_seed_offset_shifts_every_seed(monkeypatch):
    """The robustness sweep re-runs a chapter with TFM_SEED_OFFSET=k: seed s then acts as seed s + k."""
    monkeypatch.delenv("TFM_SEED_OFFSET", raising=False)
    drawn = torch.randint(0, 1000, (5,), generator=tfm.generator(3))
    tfm.seed_everything(3)
    expected_global = torch.rand(3)
    monkeypatch.setenv("TFM_SEED_OFFSET", "2")
    assert torch.equal(torch.randint(0, 1000, (5,), generator=tfm.generator(1)), drawn)
    tfm.seed_everything(1)
    assert torch.equal(torch.rand(3), expected_global)
    monkeypatch.setenv("TFM_SEED_OFFSET", "-1")
    with pytest.raises(ValueError, match="TFM_SEED_OFFSET must be a non-negative integer"):
        tfm.generator(0)
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        tfm.seed_everything(-3)


def test_slip_hint_names_a_slip_only_when_the_answer_shows_it():
    from tfm.check import slip_hint

    slips = {(0.87, 0.12): "unscaled", (128, 128): "one sequence"}
    assert slip_hint((0.871, 0.119), slips, "method") == "unscaled"  # within the rounding of the answer
    assert slip_hint([128, 128], slips, "method") == "one sequence"
    assert slip_hint(torch.tensor([0.87, 0.12]), slips, "method") == "unscaled"
    assert slip_hint((0.5, 0.5), slips, "method") == "method"
    assert slip_hint((0.87, 0.12, 0.0), slips, "method") == "method"  # another shape is another answer
    assert slip_hint("abc", slips, "method") == "method"  # not numbers


def test_a_named_slip_beats_close():
    # a slip that lies within 10 x atol of the answer got "close: give it to within ..." (chapter 13's 0.03 for 0.015)
    from tfm.check import CheckFailed, check_answer, slip_hint

    hint = slip_hint(0.03, {0.03: "that counts [CLS]"}, "method")
    with pytest.raises(CheckFailed, match="that counts"):
        check_answer(0.03, 0.015, name="p", hint=hint, atol=0.005)
    with pytest.raises(CheckFailed, match="close: give it to within 0.001"):  # no slip shown: "close" stays
        check_answer(0.02, 0.015, name="p", hint=slip_hint(0.02, {0.03: "that counts [CLS]"}, "method"), atol=0.001)
