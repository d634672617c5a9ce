"""tfm's encoder with the MiniLM BERT weights reproduces Hugging Face's BertModel (hidden states and attentions)."""

from __future__ import annotations

import os

import pytest
import torch

from tfm.interop import bert_from_hf, minilm_path

transformers = pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def bert():
    path = minilm_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    hf = transformers.AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    return tokenizer, hf, bert_from_hf(hf)


def test_hidden_states_and_attentions_match_hugging_face(bert):
    tokenizer, hf, ours = bert
    batch = tokenizer(["The animal didn't cross the street because it was too tired.", "Time flies like an arrow."],
                      return_tensors="pt", padding=True)
    with torch.no_grad():
        ref = hf(**batch, output_hidden_states=True, output_attentions=True)
        hidden, weights = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    real = batch["attention_mask"].bool()  # compare at real tokens; padded rows are not defined the same way
    assert len(hidden) == len(ref.hidden_states) == 7 and len(weights) == len(ref.attentions) == 6
    for ours_h, ref_h in zip(hidden, ref.hidden_states, strict=True):
        assert (ours_h - ref_h)[real].abs().max().item() <= 1e-5
    for ours_a, ref_a in zip(weights, ref.attentions, strict=True):  # (B, h, T, T); rows of real query tokens
        assert (ours_a - ref_a).transpose(1, 2)[real].abs().max().item() <= 1e-5


def test_interop_rejects_other_activations(bert):
    _, hf, _ = bert
    original = hf.config.hidden_act
    hf.config.hidden_act = "relu"
    try:
        with pytest.raises(ValueError, match="hidden_act='relu'"):
            bert_from_hf(hf)
    finally:
        hf.config.hidden_act = original
