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


@pytest.mark.parametrize("view", [attnviz.head_view, attnviz.model_view])
def test_same_inputs_same_html_with_a_deterministic_id(view):
    a, b = view(attentions(), TOKENS).data, view(attentions(), TOKENS).data
    assert a == b
    ids = set(re.findall(r"bertviz-[0-9a-zA-Z]+", a))
    assert len(ids) == 1, ids
    assert not re.search(r"bertviz-[0-9a-f]{32}", a), "the random uuid id survived"
    assert set(re.findall(r"bertviz-[0-9a-zA-Z]+", view(attentions(seed=1), TOKENS).data)) != ids


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
