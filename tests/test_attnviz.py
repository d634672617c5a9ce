"""tfm.attnviz: bertviz HTML that draws without require.js and is the same on every run."""

import re

import pytest
import torch

pytest.importorskip("bertviz")
import tfm.attnviz as attnviz  # noqa: E402

TOKENS = ["[CLS]", "the", "animal", "was", "tired", "[SEP]"]


def attentions(seed: int = 0, layers: int = 2, heads: int = 3, t: int = len(TOKENS)) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, heads, t, t, generator=g).softmax(-1) for _ in range(layers)]  # (1, h, T, T) per layer


@pytest.fixture(autouse=True)
def _fresh_session(monkeypatch):
    monkeypatch.setattr(attnviz, "_ids_given", {})  # each test starts like a fresh kernel


def ids_in(html: str) -> set[str]:
    return set(re.findall(r"bertviz-[0-9a-zA-Z-]+", html))


@pytest.mark.parametrize("view", [attnviz.head_view, attnviz.model_view])
def test_the_id_comes_from_the_inputs_never_from_the_weights(view):
    first = view(attentions(seed=0), TOKENS).data
    assert len(ids_in(first)) == 1, ids_in(first)
    assert not re.search(r"bertviz-[0-9a-f]{32}", first), "the random uuid id survived"
    attnviz._ids_given.clear()  # a new session, e.g. another machine running the same notebook
    assert view(attentions(seed=0), TOKENS).data == first
    attnviz._ids_given.clear()
    other_weights = view(attentions(seed=1), TOKENS).data  # other digits, as another CPU would give
    assert ids_in(other_weights) == ids_in(first)
    attnviz._ids_given.clear()
    other_tokens = view(attentions(seed=0), TOKENS[:-1] + ["[PAD]"]).data
    assert ids_in(other_tokens) != ids_in(first)


def test_a_repeated_view_gets_its_own_id_on_the_page():
    ids = [ids_in(attnviz.head_view(attentions(), TOKENS).data) for _ in range(3)]
    assert len(set.union(*ids)) == 3, ids


def sanitized(text: str) -> str:
    """``text`` as nbval compares it, with the book's sanitizer file (tests/sanitize.cfg)."""
    from pathlib import Path

    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns((Path(__file__).parent / "sanitize.cfg").read_text())
    for regex, replace in patterns:
        text = re.sub(regex, replace, text)
    return text


@pytest.mark.parametrize("view", [attnviz.head_view, attnviz.model_view])
def test_views_compare_equal_under_nbval_whatever_their_digits(view):
    a = view(attentions(seed=0), TOKENS).data
    attnviz._ids_given.clear()
    b = view(attentions(seed=1), TOKENS).data
    assert a != b and sanitized(a) == sanitized(b)
    assert '"attn": [NUMBERS]' in sanitized(a)
    attnviz._ids_given.clear()
    assert sanitized(view(attentions(seed=0), TOKENS[:-1] + ["[PAD]"]).data) != sanitized(a), "tokens still count"


@pytest.mark.parametrize("view", [attnviz.head_view, attnviz.model_view])
def test_no_require_js(view):
    html = view(attentions(), TOKENS).data
    assert "require.min.js" not in html
    assert "requirejs(" not in html and "require.config" not in html
    assert "tfmAttnviz(function" in html and html.count("if (w.tfmAttnviz) { return; }") == 1
    assert attnviz.D3_URL in html and attnviz.JQUERY_URL in html


def test_tokens_and_rounded_weights_in_the_html():
    html = attnviz.head_view(attentions(), TOKENS).data
    for token in TOKENS:
        assert f'"{token}"' in html
    numbers = re.findall(r"\d\.\d+", html.split("const params = ", 1)[1][:5000])
    assert numbers and all(len(n.split(".")[1]) <= 4 for n in numbers), numbers[:5]


def test_encoder_decoder_head_view():
    src, tgt = ["a", "b", "c"], ["x", "y"]
    html = attnviz.head_view(encoder_attention=attentions(t=3), decoder_attention=attentions(t=2),
                             cross_attention=[torch.rand(1, 3, 2, 3).softmax(-1) for _ in range(2)],
                             encoder_tokens=src, decoder_tokens=tgt).data
    assert "Cross" in html and '"x"' in html and "requirejs(" not in html


def test_wrong_shapes_are_reported():
    with pytest.raises(ValueError):
        attnviz.head_view(attentions(t=4), TOKENS)
