"""tfm.lm: the corpus split and streams, windows that predict the next id, a held-out loss equal to the per-token
cross-entropy, and a short training run that lowers it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tfm
from tfm.lm import (
    consecutive_windows,
    corpus_lm,
    count_model_losses,
    fit_power_law,
    held_out_loss,
    random_windows,
    repeated_span_windows,
    split_paragraphs,
    train_lm,
)
from tfm.ngram import KneserNey


def test_split_keeps_held_out_text_out_of_training():
    train, held_out = split_paragraphs()
    assert not set(train) & set(held_out) and len(held_out) == 139  # chapter 12's 139 held-out paragraphs


def test_streams_are_the_paragraphs_joined_by_sep():
    data = corpus_lm(100)
    sep = data.tokenizer.id_of("[SEP]")
    assert data.n_vocab == len(data.tokenizer)
    assert len(data.train) == sum(len(p) + 1 for p in data.train_paragraphs)
    assert data.train[: len(data.train_paragraphs[0]) + 1].tolist() == [*data.train_paragraphs[0], sep]
    assert (data.held_out == sep).sum() == len(data.held_out_paragraphs)
    assert data.tokenizer.decode(data.held_out_paragraphs[0]).split()[:3] == split_paragraphs()[1][0].split()[:3]


def test_windows_predict_the_next_id():
    stream = torch.arange(100)
    x, y = random_windows(stream, 10, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 10) and torch.equal(y, x + 1)
    x, y = consecutive_windows(stream, 10)
    assert x.shape == (9, 10) and torch.equal(x.flatten(), torch.arange(90)) and torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="longer than length"):
        random_windows(torch.arange(5), 10, 2)
    x, y = consecutive_windows(stream, 10, stride=4)  # overlapping: starts 0, 4, ..., 88
    assert x.shape == (23, 10) and x[:, 0].tolist() == list(range(0, 89, 4)) and torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="stride must lie in"):
        consecutive_windows(stream, 10, stride=11)


def test_repeated_span_windows_repeat_a_span_at_varying_distances():
    stream = torch.arange(10_000)  # every id differs, so a repeated id can only come from a copied span
    x, y = repeated_span_windows(stream, 31, 500, share=1.0, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (500, 31) and torch.equal(x[:, 1:], y[:, :-1])
    window = torch.cat([x, y[:, -1:]], dim=1)  # (500, 32)
    distances = set()
    for row in window.tolist():
        copied = [t for t in range(32) if row[t] != row[0] + t]  # the overwritten positions: one run
        s = len(copied)
        b = copied[0]
        a = row[b] - row[0]  # the copy starts with the id that stood at position a
        assert 4 <= s <= 16 and copied == list(range(b, b + s)) and b >= a + s
        assert row[b : b + s] == row[a : a + s]
        distances.add(b - a)
    assert len(distances) > 10  # the copy is not at a fixed distance
    x, y = repeated_span_windows(stream, 31, 64, share=0.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(y, x + 1)  # plain windows of the stream
    x, y = repeated_span_windows(stream, 31, 2000, share=0.3, generator=torch.Generator().manual_seed(0))
    assert abs((y != x + 1).any(dim=1).float().mean().item() - 0.3) < 0.05
    with pytest.raises(ValueError, match="share must lie in"):
        repeated_span_windows(stream, 31, 4, share=1.5)


def test_count_model_losses_score_each_window_from_its_own_ids():
    data = corpus_lm(100)
    stream = data.held_out[:700]
    for order in (1, 2, 4):
        model = KneserNey(order, data.n_vocab).fit([data.train[:5000].tolist()])
        for stride in (None, 16):
            losses = count_model_losses(model, stream, 32, stride)  # (n, T)
            x, y = consecutive_windows(stream, 32, stride)
            assert losses.shape == x.shape
            for row in (0, 3, len(x) - 1):
                window = [*x[row].tolist(), y[row, -1].item()]  # the window's ids and its last next id
                expected = model.cross_entropy([window], score_from=1)
                assert losses[row].mean().item() == pytest.approx(expected, rel=1e-9)


def test_held_out_loss_is_the_mean_per_token_cross_entropy_and_training_lowers_it():
    data = corpus_lm(100)
    torch.manual_seed(0)
    model = tfm.CausalLM(data.n_vocab, d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0, max_len=32)
    mean, by_position = held_out_loss(model, data.held_out, 32)
    x, y = consecutive_windows(data.held_out, 32)
    with torch.no_grad():
        expected = F.cross_entropy(model(x).transpose(1, 2), y, reduction="none")  # (n, T)
    assert mean == pytest.approx(expected.mean().item(), abs=1e-5)
    assert torch.allclose(by_position, expected.mean(0), atol=1e-5)
    history = train_lm(model, data, steps=60, length=32, batch=8, generator=torch.Generator().manual_seed(0),
                       eval_every=30)
    assert history["eval_step"] == [0, 30, 60]
    assert history["eval_loss"][-1] < history["eval_loss"][0] - 0.5  # from about log(n_vocab) downwards


def test_fit_power_law_recovers_an_exact_law_and_matches_numpy():
    import numpy as np

    sizes = [1e3, 4e3, 2e4, 1e5]
    alpha, a = fit_power_law(sizes, [3.0 * n ** -0.2 for n in sizes])
    assert alpha == pytest.approx(0.2) and a == pytest.approx(3.0)
    noisy = [5.1, 4.6, 4.5, 4.1]
    slope, intercept = np.polyfit(np.log(sizes), np.log(noisy), 1)
    assert fit_power_law(sizes, noisy) == pytest.approx((-slope, np.exp(intercept)))
    with pytest.raises(ValueError, match="at least two points"):
        fit_power_law([1e3], [4.0])
    with pytest.raises(ValueError, match="positive"):
        fit_power_law([1e3, 0.0], [4.0, 3.0])


def test_train_on_stream_ends_at_final_lr_and_names_bad_sizes():
    from tfm.lm import train_on_stream

    stream = torch.randint(0, 12, (400,), generator=torch.Generator().manual_seed(0))
    model = tfm.CausalLM(12, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=16)
    rates = []
    original = torch.optim.lr_scheduler.OneCycleLR.step

    def record(scheduler, *args, **kwargs):
        original(scheduler, *args, **kwargs)
        rates.append(scheduler.get_last_lr()[0])

    torch.optim.lr_scheduler.OneCycleLR.step = record
    try:
        history = train_on_stream(model, stream[:300], stream[300:], steps=20, length=16, batch=4, lr=1e-2,
                                  betas=(0.9, 0.99), final_lr=1e-3, eval_every=10,
                                  generator=torch.Generator().manual_seed(1))
    finally:
        torch.optim.lr_scheduler.OneCycleLR.step = original
    assert rates[-1] == pytest.approx(1e-3, rel=0.1) and max(rates) == pytest.approx(1e-2, rel=0.05), rates
    assert len(history["eval_loss"]) >= 2
    with pytest.raises(ValueError, match="must be longer than one window of 16"):
        train_on_stream(model, stream[:10], stream[300:], steps=2, length=16)
    with pytest.raises(ValueError, match="steps, length and batch must be >= 1"):
        train_on_stream(model, stream[:300], stream[300:], steps=0, length=16)


def test_train_on_stream_decay_vectors_false_decays_the_matrices_only():
    # one step of three runs from the same start and batch (so the same gradients): weight decay everywhere, on the
    # matrices only, nowhere. Without decay on the vectors, the norm gains and biases move as if there were no
    # decay, the matrices as with it
    from tfm.lm import train_on_stream

    stream = torch.randint(0, 12, (400,), generator=torch.Generator().manual_seed(0))
    ends = {}
    for name, weight_decay, decay_vectors in [("all", 5.0, True), ("matrices", 5.0, False), ("none", 0.0, True)]:
        tfm.seed_everything(0)
        model = tfm.CausalLM(12, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=16)
        train_on_stream(model, stream[:300], stream[300:], steps=1, length=16, batch=4, lr=1e-2,
                        weight_decay=weight_decay, decay_vectors=decay_vectors, eval_every=1,
                        generator=torch.Generator().manual_seed(1))
        ends[name] = dict(model.named_parameters())
    vectors = [n for n, p in ends["all"].items() if p.dim() == 1]
    matrices = [n for n, p in ends["all"].items() if p.dim() > 1]
    assert vectors and matrices
    for n in vectors:  # norm gains and biases: untouched by the decay
        assert torch.equal(ends["matrices"][n], ends["none"][n]), n
    gains = [n for n in vectors if "norm" in n and n.endswith("weight")]  # they start at 1: decay moves them
    assert gains and all(not torch.equal(ends["all"][n], ends["none"][n]) for n in gains)
    for n in matrices:
        assert torch.equal(ends["matrices"][n], ends["all"][n]), n


def test_train_on_stream_keep_best_ends_on_the_lowest_held_out_loss():
    from tfm.lm import held_out_loss, train_on_stream

    g = torch.Generator().manual_seed(0)
    train_ids, held_out = torch.randint(0, 12, (40,), generator=g), torch.randint(0, 12, (200,), generator=g)
    losses = {}
    for keep_best in (False, True):
        tfm.seed_everything(0)
        model = tfm.CausalLM(12, d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0, max_len=16)
        history = train_on_stream(model, train_ids, held_out, steps=60, length=16, batch=8, lr=1e-2,
                                  eval_every=5, generator=torch.Generator().manual_seed(1), keep_best=keep_best)
        losses[keep_best] = held_out_loss(model, held_out, 16)[0]
    # 40 training ids are memorised: the held-out loss rises again, so the last weights are not the best ones
    best = min(history["eval_loss"])
    assert history["eval_loss"][-1] > best + 0.05, history["eval_loss"]
    assert losses[True] == pytest.approx(best, abs=1e-6) and losses[False] > best + 0.05
    assert history["best_step"] == history["eval_step"][history["eval_loss"].index(best)]


def test_fit_power_law_with_floor_recovers_a_law_and_matches_scipy():
    import numpy as np
    from scipy.optimize import curve_fit

    from tfm.lm import fit_power_law_with_floor

    sizes = [6e3, 1.3e4, 2.4e4, 1e5, 3.9e5]
    exact = [1.2 + 40.0 * n ** -0.45 for n in sizes]
    e, a, alpha = fit_power_law_with_floor(sizes, exact)
    assert (e, a, alpha) == pytest.approx((1.2, 40.0, 0.45), rel=1e-5)
    noise = [0.01, -0.008, 0.004, -0.006, 0.007]
    noisy = [v + d for v, d in zip(exact, noise, strict=True)]
    mine = fit_power_law_with_floor(sizes, noisy)

    def law(n, e, a, alpha):
        return e + a * n ** -alpha

    theirs, _ = curve_fit(law, np.array(sizes), np.array(noisy), p0=(1.0, 30.0, 0.5), maxfev=20000)
    sse = [sum((law(n, *p) - v) ** 2 for n, v in zip(sizes, noisy, strict=True)) for p in (mine, theirs)]
    assert sse[0] <= sse[1] * (1 + 1e-6) and mine[2] == pytest.approx(theirs[2], rel=1e-3), (mine, theirs)
    # a law with no floor: E comes out at 0 and alpha as fit_power_law finds it
    e, a, alpha = fit_power_law_with_floor(sizes, [3.0 * n ** -0.2 for n in sizes])
    assert e == pytest.approx(0.0, abs=1e-6) and alpha == pytest.approx(0.2, rel=1e-5)
    with pytest.raises(ValueError, match="at least three points"):
        fit_power_law_with_floor([1e3, 2e3], [4.0, 3.0])
    with pytest.raises(ValueError, match="positive sizes"):
        fit_power_law_with_floor([1e3, 2e3, -1.0], [4.0, 3.0, 2.0])
