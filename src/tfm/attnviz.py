"""bertviz views that draw in a plain HTML page (the book's website) as well as in Jupyter and Colab.

Stock bertviz output relies on require.js, which a Jupyter Book page does not load, so the view draws nothing
there; it also gives each view a random ``bertviz-<uuid>`` id, so re-executing a notebook never reproduces its
stored output. The functions here call bertviz with ``html_action="return"`` and rewrite its HTML:

- the require.js ``<script>`` tag and ``require.config`` are removed; ``requirejs(['jquery', 'd3'], f)`` becomes
  ``tfmAttnviz(f)``, a small loader (defined once per page) that adds d3 and jQuery with plain ``<script src>``
  tags from jsDelivr's npm mirror (d3 5.7.0 as bertviz uses; jQuery 2.2.4, as bertviz's 2.0.0 is not on npm), then
  calls every waiting view. While it loads them it hides an AMD ``define`` (Jupyter classic has require.js), so both
  libraries register as globals;
- the URLs stay on the CDN: a notebook in Jupyter or Colab has no site to load files from, and inlining d3 and
  jQuery (330 kB) into every view would make each stored notebook that much longer. The book's website serves its
  own copies instead: its build rewrites these URLs (``tools/course/website.py`` in the repository), so the site's
  views draw without network;
- the random id becomes ``bertviz-`` + a hash of the view's kind, its tokens and its options (never of the weights,
  whose last digits differ between CPUs), so the same inputs give the same HTML on every machine. A view repeated
  with identical inputs in one session gets a numbered suffix, so ids stay unique on a page;
- attention weights are rounded to 4 decimals, which keeps the stored HTML short. Rounded digits can still differ
  between machines, so the book's nbval sanitizer (section ``[bertviz-data]``) compares views without their numbers;
  the cells that produce the weights assert them against a reference instead.

This module imports bertviz, an optional dependency (``pip install "tfm[bert]"``): import it as ``tfm.attnviz``.
"""

from __future__ import annotations

import hashlib
import json
import re

import torch
from IPython.display import HTML
from torch import Tensor

D3_URL = "https://cdn.jsdelivr.net/npm/d3@5.7.0/dist/d3.min.js"
JQUERY_URL = "https://cdn.jsdelivr.net/npm/jquery@2.2.4/dist/jquery.min.js"

_LOADER = """<script type="text/javascript">
(function () {
  var w = window;
  if (w.tfmAttnviz) { return; }
  var queue = [], state = 0;
  function load(src, done) {
    var s = document.createElement('script');
    s.src = src; s.onload = done; s.onerror = done;
    document.head.appendChild(s);
  }
  function start() {
    state = 1;
    var savedDefine = w.define;
    w.define = undefined;
    var need = [];
    if (!(w.d3 && w.d3.scaleOrdinal)) { need.push('D3_URL'); }
    if (!w.jQuery) { need.push('JQUERY_URL'); }
    (function next() {
      if (need.length) { load(need.shift(), next); return; }
      w.define = savedDefine;
      state = 2;
      var waiting = queue; queue = [];
      waiting.forEach(function (f) { f(w.jQuery, w.d3); });
    })();
  }
  w.tfmAttnviz = function (f) {
    if (state === 2) { f(w.jQuery, w.d3); return; }
    queue.push(f);
    if (state === 0) { start(); }
  };
})();
</script>
""".replace("D3_URL", D3_URL).replace("JQUERY_URL", JQUERY_URL)

_REQUIRE_TAG = re.compile(r'<script src="[^"]*require\.min\.js"></script>')
_REQUIRE_CONFIG = re.compile(r"require\.config\(\{.*?\}\s*\}\);", re.S)
_REQUIREJS_CALL = re.compile(r"requirejs\(\s*\['jquery',\s*'d3'\],\s*")
_RANDOM_ID = re.compile(r"bertviz-[0-9a-f]{32}")


_ids_given: dict[str, int] = {}


def _view_id(kind: str, **inputs) -> str:
    """A stable element id from the view's kind, tokens and options: ``bertviz-`` + 16 hex digits."""
    described = json.dumps({"kind": kind, **inputs}, sort_keys=True, default=_describe)
    digest = hashlib.sha1(described.encode()).hexdigest()[:16]
    _ids_given[digest] = _ids_given.get(digest, 0) + 1
    repeat = _ids_given[digest]
    return f"bertviz-{digest}" + (f"-{repeat}" if repeat > 1 else "")


def _describe(value) -> object:
    """JSON stand-in for what is not JSON: a tensor (or list of them) by its shape only, never its values."""
    if isinstance(value, Tensor):
        return {"shape": list(value.shape)}
    return type(value).__name__


def _rewrite(html: str, view_id: str) -> HTML:
    """Turn stock bertviz HTML into self-loading HTML with the id ``view_id``."""
    html = _REQUIRE_TAG.sub("", html)
    html = _REQUIRE_CONFIG.sub("", html)
    html = _REQUIREJS_CALL.sub("tfmAttnviz(", html)
    ids = set(_RANDOM_ID.findall(html))
    if len(ids) != 1 or "requirejs(" in html or "require.config" in html:
        raise RuntimeError("unexpected bertviz HTML (a bertviz version other than 1.4.1?)")
    html = html.replace(ids.pop(), view_id)
    return HTML(_LOADER + html)


def _rounded(attentions) -> list[Tensor]:
    """Per-layer attention weights (1, h, T, S) as float64 rounded to 4 decimals (short, stable JSON)."""
    if attentions is None:
        return None
    return [torch.round(a.detach().double().cpu(), decimals=4) for a in attentions]


def head_view(attention=None, tokens=None, **kwargs) -> HTML:
    """bertviz's head view (same arguments, encoder–decoder ones included) as HTML that draws anywhere."""
    from bertviz import head_view as _head_view

    for key in ("encoder_attention", "decoder_attention", "cross_attention"):
        kwargs[key] = _rounded(kwargs.get(key))
    view_id = _view_id("head", attention=attention, tokens=tokens, **kwargs)
    result = _head_view(attention=_rounded(attention), tokens=tokens, html_action="return", **kwargs)
    return _rewrite(result.data, view_id)


def model_view(attention=None, tokens=None, **kwargs) -> HTML:
    """bertviz's model view (all layers × all heads) as HTML that draws anywhere."""
    from bertviz import model_view as _model_view

    for key in ("encoder_attention", "decoder_attention", "cross_attention"):
        kwargs[key] = _rounded(kwargs.get(key))
    view_id = _view_id("model", attention=attention, tokens=tokens, **kwargs)
    result = _model_view(attention=_rounded(attention), tokens=tokens, html_action="return", **kwargs)
    return _rewrite(result.data, view_id)


def neuron_view(model, tokenizer, sentence_a: str, sentence_b: str | None = None, layer: int | None = None,
                head: int | None = None, display_mode: str = "light") -> HTML:
    """bertviz's neuron view (queries, keys, q·k and softmax of one head) as HTML that draws anywhere.

    ``model`` and ``tokenizer`` are bertviz's own ``transformers_neuron_view`` BERT classes (see
    :func:`load_neuron_bert`). The view's parameters are written inline rather than in the global
    ``window.bertviz_params``, so several neuron views can share a page.
    """
    from bertviz.neuron_view import show

    result = show(model, "bert", tokenizer, sentence_a, sentence_b, display_mode=display_mode, layer=layer,
                  head=head, html_action="return")
    html = result.data
    match = re.search(r"window\.bertviz_params = (.*?)\n</script>", html, re.S)
    if match is None:
        raise RuntimeError("unexpected bertviz neuron-view HTML (a bertviz version other than 1.4.1?)")
    params = json.loads(match.group(1))

    def rounded(value):
        if isinstance(value, float):
            return round(value, 4)
        if isinstance(value, list):
            return [rounded(v) for v in value]
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        return value

    params_json = json.dumps(rounded(params))
    html = html[:match.start()] + "/* parameters inline below */\n</script>" + html[match.end():]
    html = html.replace("const params = window.bertviz_params", "const params = " + params_json, 1)
    view_id = _view_id("neuron", sentence_a=sentence_a, sentence_b=sentence_b, layer=layer, head=head,
                       display_mode=display_mode, n_layers=model.config.num_hidden_layers)
    return _rewrite(html, view_id)


def load_neuron_bert(path: str):
    """bertviz's neuron-view BERT and tokenizer, loaded from a Hugging Face folder holding ``model.safetensors``.

    bertviz's own ``from_pretrained`` only looks for ``pytorch_model.bin``; this builds the model from its config
    and loads the safetensors weights (dropping ``embeddings.position_ids``, a buffer rather than a weight).
    """
    import os

    from bertviz.transformers_neuron_view import BertModel, BertTokenizer
    from bertviz.transformers_neuron_view.modeling_bert import BertConfig
    from safetensors.torch import load_file

    config = BertConfig.from_json_file(os.path.join(path, "config.json"))
    model = BertModel(config)
    state = load_file(os.path.join(path, "model.safetensors"))
    state = {k.removeprefix("bert."): v for k, v in state.items() if not k.endswith("position_ids")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    model.eval()
    tokenizer = BertTokenizer(os.path.join(path, "vocab.txt"), do_lower_case=True)
    return model, tokenizer
