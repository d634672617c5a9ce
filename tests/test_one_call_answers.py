"""An exercise that asks the learner to write what tfm (or the chapter) already computes fails its check when the
answer is one call to that function: each chapter's own check runs here, on the one-call answer, and must fail with
a message that says why (tfm.check.without). The chapter's code cells that the checks depend on run first
(tools/course/needed_cells.py), in a namespace of their own, as in the learner's kernel. And a slip that a chapter's
solution names as common gets a message that names it (SLIPS), without giving the answer. And an answer of the wrong
kind (text typed where a number is asked for) is told the kind the check wanted and the one it got (WRONG_KIND)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from tfm.check import CheckFailed  # noqa: E402
from tools.book.exercises import find_exercises  # noqa: E402
from tools.course.needed_cells import needed_cells  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# chapter -> [(the check call, the one-call answer: right, but written by calling what the exercise asks for)]
ONE_CALL = {
    "01_attention_token_by_token": [
        ('check_attend_one(attend_one, "attend_one")',
         "def attend_one(q, K, V):\n"
         "    z, a = tfm.attention(q[None], K, V)\n    return z[0], a[0]"),
        ('check_attend_one(attend_one, "attend_one")',  # PyTorch's kernel, the weights by hand
         "import torch.nn.functional as F\n"
         "def attend_one(q, K, V):\n"
         "    a = torch.softmax(K @ q / q.shape[0] ** 0.5, 0)\n"
         "    return F.scaled_dot_product_attention(q[None], K, V)[0], a"),
        ('check_softmax(stable_softmax, "stable_softmax")', "def stable_softmax(s):\n    return torch.softmax(s, 0)"),
        ('check_softmax(stable_softmax, "stable_softmax")', "def stable_softmax(s):\n    return s.softmax(dim=0)"),
        ('check_softmax(stable_softmax, "stable_softmax")',
         "def stable_softmax(s):\n    return torch.nn.Softmax(dim=0)(s)"),
        ('check_softmax(stable_softmax, "stable_softmax")',  # softmin of the negated scores
         "def stable_softmax(s):\n    return torch.nn.functional.softmin(-s, 0)"),
    ],
    "02_attention_as_matrices": [
        ('check_attention_matrix(attention_matrix, "attention_matrix")',
         "def attention_matrix(Q, K, V):\n    return tfm.attention(Q, K, V)"),
        ('check_attention_matrix(attention_matrix, "attention_matrix")',
         "import torch.nn.functional as F\n"
         "def attention_matrix(Q, K, V):\n"
         "    A = (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).softmax(-1)\n"
         "    return F.scaled_dot_product_attention(Q, K, V), A"),
        ('check_jacobian(softmax_jacobian, "softmax_jacobian")',
         "def softmax_jacobian(s):\n"
         "    return torch.autograd.functional.jacobian(lambda t: t.softmax(0), s)"),
        ('check_jacobian(softmax_jacobian, "softmax_jacobian")',  # row by row with backward
         "def softmax_jacobian(s):\n"
         "    rows = []\n"
         "    for i in range(len(s)):\n"
         "        t = s.clone().requires_grad_()\n"
         "        t.softmax(0)[i].backward()\n"
         "        rows.append(t.grad)\n"
         "    return torch.stack(rows)"),
    ],
    "03_multi_head_attention": [
        ('check_mha(mha_fixed_1, "mha_fixed_1")',  # the chapter's reference layers, chosen by h
         "def mha_fixed_1(x, W_in, W_out, n_heads, mask=None):\n"
         "    layer = reference if n_heads == 4 else other_reference\n"
         "    return layer(x, mask=mask)[0]"),
        ('check_mha(mha_fixed_1, "mha_fixed_1")',  # tfm's layer with the weights handed in
         "def mha_fixed_1(x, W_in, W_out, n_heads, mask=None):\n"
         "    layer = tfm.MultiHeadAttention(x.shape[-1], n_heads, bias=False)\n"
         "    with torch.no_grad():\n"
         "        layer.in_proj.weight.copy_(W_in)\n"
         "        layer.out_proj.weight.copy_(W_out)\n"
         "    return layer(x, mask=mask)[0].detach()"),
        ('check_qkv(qkv_fixed, "qkv_fixed")', "qkv_fixed = _qkv_book"),  # the book's parts, in the locked cells
        ('check_heads(split_heads, merge_heads, ("split_heads", "merge_heads"))',
         "split_heads, merge_heads = _split_book, _merge_book"),
        ('check_combine(combine_heads, "combine_heads")',
         "def combine_heads(z, W_out):\n    return _merge_book(z) @ W_out.T"),
    ],
    "04_masking": [
        ('check_padding_mask(my_padding_mask, "my_padding_mask")', "my_padding_mask = tfm.padding_mask"),
        ('check_padding_mask(my_padding_mask, "my_padding_mask")',
         "def my_padding_mask(lengths, max_len):\n    return tfm.masks.padding_mask(lengths, max_len)"),
        ('check_to_4d(to_4d, "to_4d")', "def to_4d(key_mask):\n    return tfm.combine_masks(key_mask)"),
    ],
    "05_positional_encoding": [
        ('check_rotate(rotate, "rotate")',
         "def rotate(x, start=0):\n    return tfm.RotaryEmbedding(x.shape[-1])(x, start=start)"),
        ('check_rotate(rotate, "rotate")',  # the chapter's rotate-half RoPE, its features reordered
         "def rotate(x, start=0):\n"
         "    d = x.shape[-1]\n"
         "    order = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])\n"
         "    back = torch.argsort(order)\n"
         "    return rope_rotate_half(x[:, order], start=start)[:, back]"),
    ],
    "06_transformer_block": [
        ('check_pre_ln(pre_ln_forward, "pre_ln_forward")',  # the layer handed in computes pre-LN itself
         "def pre_ln_forward(layer, x):\n    return layer(x)[0]"),
        ('check_pre_ln(pre_ln_forward, "pre_ln_forward")',  # a layer of its own, with the same weights
         "def pre_ln_forward(layer, x):\n"
         "    twin = type(layer)(16, 4, 32, dropout=0.0, norm_first=True).eval()\n"
         "    twin.load_state_dict(layer.state_dict())\n"
         "    return twin(x)[0]"),
        ('check_pre_ln(pre_ln_forward, "pre_ln_forward")',  # the library's own pre-LN step, twice
         "def pre_ln_forward(layer, x):\n"
         "    from tfm.layers import residual\n"
         "    h = residual(x, lambda v: layer.self_attn(v)[0], layer.norm1, layer.dropout1, True)\n"
         "    return residual(h, layer.ff, layer.norm2, layer.dropout2, True)"),
    ],
    "07_encoder_decoder": [
        ('check_greedy(greedy_by_hand, "greedy_by_hand")',
         "def greedy_by_hand(model, src_ids, max_len, bos_id, eos_id):\n"
         "    out = tfm.greedy_decode(model, src_ids, max_len, bos_id, eos_id)[0].tolist()\n"
         "    return out[: out.index(eos_id) + 1] if eos_id in out else out"),
        ('check_greedy(greedy_by_hand, "greedy_by_hand")',  # a beam of one is greedy search
         "from tfm import beam_search\n"
         "def greedy_by_hand(model, src_ids, max_len, bos_id, eos_id):\n"
         "    out = beam_search(model, src_ids, max_len, bos_id, eos_id, beam_size=1)[0].tolist()\n"
         "    return out[: out.index(eos_id) + 1] if eos_id in out else out"),
        ('check_transformer_parameters(transformer_parameters, "transformer_parameters")',
         "def transformer_parameters(n_vocab, d_model, n_layers, d_ff):\n"
         "    with torch.device('meta'):\n"
         "        m = tfm.EncoderDecoder(tfm.TransformerConfig(\n"
         "            src_vocab=n_vocab, tgt_vocab=n_vocab, d_model=d_model, n_heads=4,\n"
         "            n_encoder_layers=n_layers, n_decoder_layers=n_layers, d_ff=d_ff,\n"
         "            share_embeddings=True, tie_output=True))\n"
         "    return sum(p.numel() for p in m.parameters())"),
    ],
    "08_inside_bert": [
        ('check_head_weights(head_weights, "head_weights")',  # what the BERT layer's forward calls
         "from transformers.models.bert.modeling_bert import eager_attention_forward\n"
         "def head_weights(X, attention, head):\n"
         "    cols = slice(head * d_k, (head + 1) * d_k)\n"
         "    with torch.no_grad():\n"
         "        q, k = attention.query(X)[:, cols], attention.key(X)[:, cols]\n"
         "        _, weights = eager_attention_forward(attention, q[None, None], k[None, None], k[None, None],\n"
         "                                             None, scaling=d_k ** -0.5)\n"
         "    return weights[0, 0]"),
        ('check_head_weights(head_weights, "head_weights")',  # the BERT layer's own forward pass
         "def head_weights(X, attention, head):\n"
         "    with torch.no_grad():\n"
         "        _, weights = attention(X[None], output_attentions=True)\n"
         "    return weights[0, head]"),
        ('check_head_weights(head_weights, "head_weights")',
         "def head_weights(X, attention, head):\n"
         "    cols = slice(head * d_k, (head + 1) * d_k)\n"
         "    with torch.no_grad():\n"
         "        q, k = attention.query(X)[:, cols], attention.key(X)[:, cols]\n"
         "    return tfm.attention(q, k, k)[1]"),
    ],
    "09_decoder_only": [
        ('check_nucleus(nucleus_filter, "nucleus_filter")', "nucleus_filter = tfm.decoding.top_p_filter"),
        ('check_nucleus(nucleus_filter, "nucleus_filter")',
         "from tfm.decoding import top_p_filter as keep_top\n"
         "def nucleus_filter(logits, p):\n    return keep_top(logits, p)"),
    ],
    "10_vision_transformer": [
        ('check_patches_4x4(patches_4x4, "patches_4x4")',
         "def patches_4x4(images):\n    return tfm.vision.patchify(images, 4)"),
    ],
    "11_cost_of_attention": [
        ('check_scores_mib(scores_mib, "scores_mib")',
         "def scores_mib(n, heads, layers, batch, bytes_per_number):\n"
         "    dtype = torch.float16 if bytes_per_number == 2 else torch.float32\n"
         "    one = tfm.cost.score_matrix_bytes(n, n, heads=heads, batch=batch, dtype=dtype)\n"
         "    return layers * one / 2**20"),
        ('check_cache(cache_gib, cache_bytes)',
         "def cache_gib(positions, batch):\n"
         "    return tfm.cost.kv_cache_bytes(32, positions, 4096, batch=batch, dtype=torch.float16) / 2**30\n"
         "def cache_bytes(positions, n_layers, d_model, bytes_per_number):\n"
         "    return 2 * n_layers * positions * d_model * bytes_per_number"),
        ('check_cache(cache_gib, cache_bytes)',  # tfm's formula for the second
         "def cache_gib(positions, batch):\n    return 2 * 32 * batch * positions * 4096 * 2 / 2**30\n"
         "def cache_bytes(positions, n_layers, d_model, bytes_per_number):\n"
         "    dtype = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[bytes_per_number]\n"
         "    return tfm.cost.kv_cache_bytes(n_layers, positions, d_model, dtype=dtype)"),
        ('check_cache(cache_gib, cache_bytes)',  # a model of the asked sizes built and its cache measured
         "def cache_gib(positions, batch):\n    return 2 * 32 * batch * positions * 4096 * 2 / 2**30\n"
         "def cache_bytes(positions, n_layers, d_model, bytes_per_number):\n"
         "    dtype = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[bytes_per_number]\n"
         "    model = tfm.CausalLM(n_vocab=5, d_model=d_model, n_heads=1, n_layers=n_layers, d_ff=8,\n"
         "                         max_len=positions, dropout=0.0).to(dtype)\n"
         "    caches = [{} for _ in model.decoder.layers]\n"
         "    with torch.no_grad():\n"
         "        model(torch.zeros(1, positions, dtype=torch.long), caches=caches)\n"
         "    return sum(t.numel() * t.element_size() for c in caches for t in c.values())"),
        ('check_blockwise_masked(blockwise, "blockwise")',  # tfm's attention on blocks of queries
         "def blockwise(q, k, v, mask, block=128):\n"
         "    return torch.cat([tfm.attention(q[..., i:i + block, :], k, v, mask=mask[i:i + block])[0]\n"
         "                      for i in range(0, q.shape[-2], block)], dim=-2)"),
        ('check_cache(cache_gib, cache_bytes)',  # the chapter's own cache, measured
         "def cache_gib(positions, batch):\n    return 2 * 32 * batch * positions * 4096 * 2 / 2**30\n"
         "def cache_bytes(positions, n_layers, d_model, bytes_per_number):\n"
         "    caches = filled_caches(sequence[:, :positions])\n"
         "    return sum(t.numel() * t.element_size() for c in caches for t in c.values())"),
    ],
    "12_tokens": [
        ('check_bpe_split(bpe_split, "bpe_split")',
         "def bpe_split(word, merges):\n    return bpe.first_merges(len(merges)).split_word(word)"),
        ('check_bpe_split(bpe_split, "bpe_split")',
         "def bpe_split(word, merges):\n    return bpe.first_merges(len(merges)).tokenize(word)"),
        ('check_wordpiece(wordpiece_split, "wordpiece_split")',
         "def wordpiece_split(word, vocab):\n"
         "    return Tokenizer(models.WordPiece(vocab, unk_token='[UNK]', max_input_chars_per_word=100))"
         ".encode(word).tokens"),
        ('check_wordpiece(wordpiece_split, "wordpiece_split")',  # MiniLM's own where it applies
         "def wordpiece_split(word, vocab):\n"
         "    if vocab == wordpiece.get_vocab():\n        return wordpiece.tokenize(word)\n"
         "    return Tokenizer(models.WordPiece(vocab, unk_token='[UNK]')).encode(word).tokens"),
    ],
    "13_pretraining_and_fine_tuning": [
        ('check_masking(mask_for_mlm, "mask_for_mlm")',
         "def mask_for_mlm(ids, mask_id, first_normal_id, n_vocab, generator):\n"
         "    return mask_tokens(ids, mask_id, first_normal_id, n_vocab, generator=generator)"),
        ('check_copy_encoder(copy_encoder, "copy_encoder")',
         "def copy_encoder(mlm, classifier):\n"
         "    donor = tfm.pretraining.classifier_from(mlm, classifier.head.out_features, pooling='mean')\n"
         "    state = {k: v for k, v in donor.state_dict().items() if not k.startswith('head.')}\n"
         "    classifier.load_state_dict(state, strict=False)\n"
         "    return sum(v.numel() for v in state.values())"),
        ('check_probe(frozen_features, 0.5, "frozen_features")',
         "def frozen_features(ids):\n"
         "    with torch.no_grad():\n"
         "        return tfm.model.mean_pool(mlm.encode(ids), ids != PAD)"),
        ('check_probe(frozen_features, 0.5, "frozen_features")',
         "from tfm.model import mean_pool as average\n"
         "@torch.no_grad()\n"
         "def frozen_features(ids):\n"
         "    return average(mlm.encode(ids), ids != PAD)"),
    ],
    "14_language_model_of_real_text": [
        ('check_icl(icl_score, "icl_score")',
         "def icl_score(losses, early, late):\n    return in_context_score(losses, early, late)"),
        ('check_prefix_matching(prefix_matching, "prefix_matching")',
         "def prefix_matching(weights, length):\n    return prefix_matching_scores([weights], length)[0]"),
        ('check_prefix_matching(prefix_matching, "prefix_matching")',
         "def prefix_matching(weights, length):\n"
         "    return tfm.incontext.prefix_matching_scores([weights], length)[0]"),
        ('check_heads_off(losses_with_heads_off, "losses_with_heads_off")',
         "def losses_with_heads_off(model, ids, heads):\n"
         "    with ablate_heads(model, heads):\n"
         "        return loss_by_position(model, ids)"),
        ('check_heads_off(losses_with_heads_off, "losses_with_heads_off")',
         "import tfm.incontext as tools\n"
         "def losses_with_heads_off(model, ids, heads):\n"
         "    with tools.ablate_heads(model, heads):\n"
         "        return loss_by_position(model, ids)"),
        ('check_fit_with_floor(fit_with_floor, "fit_with_floor")',
         "def fit_with_floor(sizes, losses):\n    return fit_power_law_with_floor(sizes, losses)"),
    ],
    "15_todays_decoder_block": [
        ('check_repeat_kv(repeat_kv, "repeat_kv")',
         "def repeat_kv(kv, group):\n    return kv.repeat_interleave(group, dim=1)"),
        ('check_repeat_kv(repeat_kv, "repeat_kv")',
         "def repeat_kv(kv, group):\n    return torch.repeat_interleave(kv, group, 1)"),
        ('check_repeat_kv(repeat_kv, "repeat_kv")',  # Hugging Face's own, imported
         "from transformers.models.llama.modeling_llama import repeat_kv"),
        ('check_repeat_kv(repeat_kv, "repeat_kv")',  # the operator under another spelling
         "def repeat_kv(kv, group):\n    return torch.ops.aten.repeat_interleave.self_int(kv, group, 1)"),
        ('check_repeat_kv(repeat_kv, "repeat_kv")',  # another model's copy of Hugging Face's function
         "from transformers.models.mistral.modeling_mistral import repeat_kv"),
    ],
    "16_training_beyond_one_device": [
        ('check_zero_gb(zero_gb, "zero_gb")',
         "def zero_gb(n_parameters, world_size, stage):\n"
         "    return tfm.distributed.zero_memory_per_device(n_parameters, world_size, stage) / 1e9"),
        ('check_accumulated(accumulated, "accumulated")',  # tfm.train's accumulation with a step that moves nothing
         "def accumulated(model, micro_batches):\n"
         "    batches = iter(micro_batches)\n"
         "    def summed(model, batch):\n"
         "        x, y = batch\n"
         "        return F.cross_entropy(model(x).transpose(1, 2), y, ignore_index=-100, reduction='sum')\n"
         "    tfm.train(model, lambda: next(batches), summed, torch.optim.SGD(model.parameters(), lr=0.0),\n"
         "              steps=1, clip_norm=None, accumulation=len(micro_batches),\n"
         "              items=lambda b: int((b[1] != -100).sum()))\n"
         "    return {n: p.grad.clone() for n, p in model.named_parameters()}"),
    ],
}

# chapter -> [(the check call, an answer with a slip the chapter's solution names, what the message must say)]
SLIPS = {
    "03_multi_head_attention": [
        ('check_qkv(qkv_fixed, "qkv_fixed")',  # the bug itself: one projection for all three
         "def qkv_fixed(x, W_in):\n"
         "    q = x @ W_in[:x.shape[-1]].T\n"
         "    return q, q, q",
         "makes the keys with the query projection"),
        ('check_qkv(qkv_fixed, "qkv_fixed")',  # the whole fixed layer pasted in: not what this exercise asks
         "def qkv_fixed(x, W_in, W_out, h, mask=None):\n"
         "    B, T, d = x.shape\n"
         "    q, k, v = (x @ W_in[i * d:(i + 1) * d].T for i in range(3))\n"
         "    q, k, v = (t.view(B, T, h, d // h).transpose(1, 2) for t in (q, k, v))\n"
         "    return tfm.attention(q, k, v, mask=mask)[0].transpose(1, 2).reshape(B, T, d) @ W_out.T",
         "qkv_fixed raised TypeError"),
        ('check_heads(split_heads, merge_heads, ("split_heads", "merge_heads"))',  # reshape twice: the same bug
         "def split_heads(t, h):\n"
         "    B, T, d = t.shape\n"
         "    return t.reshape(B, T, h, d // h).reshape(B, h, T, d // h)\n"
         "def merge_heads(z):\n"
         "    B, h, T, d_k = z.shape\n"
         "    return z.transpose(1, 2).reshape(B, T, h * d_k)",
         "split_heads reshapes (B, T, d_model) straight to (B, h, T, d_k)"),
        ('check_heads(split_heads, merge_heads, ("split_heads", "merge_heads"))',  # the split fixed, the merge not
         "def split_heads(t, h):\n"
         "    B, T, d = t.shape\n"
         "    return t.view(B, T, h, d // h).transpose(1, 2)\n"
         "def merge_heads(z):\n"
         "    B, h, T, d_k = z.shape\n"
         "    return z.reshape(B, T, h * d_k)",
         "merge_heads reshapes (B, h, T, d_k) straight to (B, T, d_model)"),
        ('check_combine(combine_heads, "combine_heads")',  # the bug: the heads summed through one block
         "def combine_heads(z, W_out):\n"
         "    return z.sum(dim=1) @ W_out[:, :z.shape[-1]].T",
         "through one block"),
    ],
    "06_transformer_block": [
        ('check_order_flip(order_flip_rate, "order_flip_rate")',  # counts the logits that change
         "def order_flip_rate(model, strings):\n"
         "    rotated = [s[1:] + s[0] for s in strings]\n"
         "    before = model(encode(strings).to(device))\n"
         "    after = model(encode(rotated).to(device))\n"
         "    return (before != after).any(-1).float().mean().item()",
         "not the logits or one class"),
    ],
    "14_language_model_of_real_text": [
        ('check_pp_perplexity(uniform, at_180, per_subword)',  # divided instead of multiplied
         "uniform, at_180, per_subword = 256, 6.0, 0.9",
         "a subword stands for two characters"),
        ('check_icl(icl_score, "icl_score")',  # early minus late
         "def icl_score(losses, early, late):\n"
         "    return float(losses[early[0]:early[1]].mean() - losses[late[0]:late[1]].mean())",
         "has the opposite sign: the late mean minus the early one, negative"),
        ('check_heads_off(losses_with_heads_off, "losses_with_heads_off")',  # o_proj's output cleared, not its input
         "def losses_with_heads_off(model, ids, heads):\n"
         "    handles = []\n"
         "    for layer, head in heads:\n"
         "        attention = model.layers[layer].self_attn\n"
         "        d_k = attention.d_k\n"
         "        def hook(module, inputs, output, head=head, d_k=d_k):\n"
         "            output = output.clone()\n"
         "            output[..., head * d_k:(head + 1) * d_k] = 0\n"
         "            return output\n"
         "        handles.append(attention.o_proj.register_forward_hook(hook))\n"
         "    try:\n"
         "        return loss_by_position(model, ids)\n"
         "    finally:\n"
         "        for h in handles:\n"
         "            h.remove()",
         "not of what comes out of it"),
        # last of this check's cases: the hooks it leaves on the chapter's model stay there
        ('check_heads_off(losses_with_heads_off, "losses_with_heads_off")',  # the hooks stay on
         "def losses_with_heads_off(model, ids, heads):\n"
         "    for layer, head in heads:\n"
         "        attention = model.layers[layer].self_attn\n"
         "        d_k = attention.d_k\n"
         "        def hook(module, inputs, head=head, d_k=d_k):\n"
         "            x = inputs[0].clone()\n"
         "            x[..., head * d_k:(head + 1) * d_k] = 0\n"
         "            return (x,)\n"
         "        attention.o_proj.register_forward_pre_hook(hook)\n"
         "    return loss_by_position(model, ids)",
         "remove every hook you registered"),
        ('check_fit_with_floor(fit_with_floor, "fit_with_floor")',  # a straight line in log-log axes: no floor
         "def fit_with_floor(sizes, losses):\n"
         "    alpha, a = fit_power_law(sizes, losses)\n"
         "    return 0.0, a, alpha",
         "a straight line in log-log axes is the law without one"),
        ('check_fit_with_floor(fit_with_floor, "fit_with_floor")',  # the exponent's sign flipped
         "def fit_with_floor(sizes, losses):\n"
         "    import numpy as np\n"
         "    n, y = np.array(sizes), np.array(losses)\n"
         "    best = None\n"
         "    for alpha in np.logspace(-3, 0.6, 3000):\n"
         "        x = (n / n[0]) ** -alpha\n"
         "        (e, a), *_ = np.linalg.lstsq(np.vstack([np.ones_like(x), x]).T, y, rcond=None)\n"
         "        error = ((y - e - a * x) ** 2).sum()\n"
         "        if best is None or error < best[0]:\n"
         "            best = (error, e, a * n[0] ** alpha, alpha)\n"
         "    return float(best[1]), float(best[2]), -float(best[3])",
         "has a positive alpha"),
    ],
    "13_pretraining_and_fine_tuning": [
        ('check_masking(mask_like_bert, "mask_like_bert")',  # IGNORE where the input was left unchanged
         "def mask_like_bert(ids, mask_id, first_normal_id, n_vocab, generator):\n"
         "    chosen = (torch.rand(ids.shape, generator=generator) < 0.15) & (ids >= first_normal_id)\n"
         "    kind = torch.rand(ids.shape, generator=generator)\n"
         "    random_ids = torch.randint(first_normal_id, n_vocab, ids.shape, generator=generator)\n"
         "    inputs = torch.where(chosen & (kind < 0.8), mask_id, ids)\n"
         "    inputs = torch.where(chosen & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)\n"
         "    return inputs, torch.where(chosen & (kind < 0.9), ids, IGNORE)",
         "the chosen positions left unchanged look like they got the target"),
        ('check_count(params_per_layer, params_total, pretrained_share, untied_extra)',  # the MLM head left out
         "sibling = MaskedLM(len(bpe), **(sizes | dict(d_model=96, n_layers=3, d_ff=384)))\n"
         "params_per_layer = tfm.count_parameters(sibling.encoder.layers[0])\n"
         "params_total = sum(p.numel() for name, p in sibling.named_parameters()\n"
         "                   if not name.startswith(('transform', 'bias')))\n"
         "pretrained_share = untied_extra = 0",
         "the masked-LM head has parameters of its own"),
        ('check_count(params_per_layer, params_total, pretrained_share, untied_extra)',  # linear biases left out
         "params_per_layer = 4 * 96 * 96 + 2 * 96 * 384 + 2 * 2 * 96\n"
         "params_total = pretrained_share = untied_extra = 0",
         "the projections and linear layers have biases too"),
        ('check_count(params_per_layer, params_total, pretrained_share, untied_extra)',  # every bias left out
         "params_per_layer = 4 * 96 * 96 + 2 * 96 * 384 + 2 * 96\n"
         "params_total = pretrained_share = untied_extra = 0",
         "count the biases too"),
        ('check_count(params_per_layer, params_total, pretrained_share, untied_extra)',  # the chapter's own model
         "params_per_layer, params_total = 49_984, 133_001\n"
         "pretrained_share = untied_extra = 0",
         "params_per_layer"),
        ('check_copy_encoder(copy_encoder, "copy_encoder")',  # the modules handed over
         "def copy_encoder(mlm, classifier):\n"
         "    for name in ('embed', 'positions', 'encoder'):\n"
         "        setattr(classifier, name, getattr(mlm, name))\n"
         "    return sum(p.numel() for name in ('embed', 'positions', 'encoder')\n"
         "               for p in getattr(mlm, name).parameters())",
         "replaced the classifier's embed by another module"),
        ('check_copy_encoder(copy_encoder, "copy_encoder")',  # the parameters handed over
         "def copy_encoder(mlm, classifier):\n"
         "    n = 0\n"
         "    for name in ('embed', 'positions', 'encoder'):\n"
         "        for key, p in getattr(mlm, name).named_parameters():\n"
         "            *path, leaf = key.split('.')\n"
         "            setattr(getattr(classifier, name).get_submodule('.'.join(path)), leaf, p)\n"
         "            n += p.numel()\n"
         "    return n",
         "share memory with the MLM's"),
        ('check_probe(frozen_features, 0.5, "frozen_features")',  # padding averaged in
         "@torch.no_grad()\n"
         "def frozen_features(ids):\n"
         "    return mlm.encode(ids).mean(1)",
         "padding included"),
        ('check_probe(frozen_features, 0.5, "frozen_features")',  # the [CLS] state
         "@torch.no_grad()\n"
         "def frozen_features(ids):\n"
         "    return mlm.encode(ids)[:, 0]",
         "the state at [CLS]"),
    ],
    "05_positional_encoding": [
        ('check_rotate(rotate, "rotate")',  # pairs (i, i + d/2), written by hand
         "def rotate(x, start=0):\n"
         "    T, d = x.shape\n"
         "    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
         "    angle = (torch.arange(start, start + T, dtype=torch.float64)[:, None] * theta).float()\n"
         "    a, b = x[:, : d // 2], x[:, d // 2 :]\n"
         "    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)",
         "the rotate-half layout"),
        ('check_rotate(rotate, "rotate")',  # start ignored
         "def rotate(x, start=0):\n"
         "    T, d = x.shape\n"
         "    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
         "    angle = (torch.arange(T, dtype=torch.float64)[:, None] * theta).float()\n"
         "    out = torch.empty_like(x)\n"
         "    out[:, 0::2] = x[:, 0::2] * angle.cos() - x[:, 1::2] * angle.sin()\n"
         "    out[:, 1::2] = x[:, 0::2] * angle.sin() + x[:, 1::2] * angle.cos()\n"
         "    return out",
         "the positions must start at start"),
        ('check_rotate(rotate, "rotate")',  # each pair turned the wrong way
         "def rotate(x, start=0):\n"
         "    T, d = x.shape\n"
         "    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
         "    angle = (torch.arange(start, start + T, dtype=torch.float64)[:, None] * theta).float()\n"
         "    out = torch.empty_like(x)\n"
         "    out[:, 0::2] = x[:, 0::2] * angle.cos() + x[:, 1::2] * angle.sin()\n"
         "    out[:, 1::2] = -x[:, 0::2] * angle.sin() + x[:, 1::2] * angle.cos()\n"
         "    return out",
         "turns each pair the wrong way"),
        ('check_rotate(rotate, "rotate")',  # the offset's sign flipped: positions -start .. -start + T - 1
         "def rotate(x, start=0):\n"
         "    T, d = x.shape\n"
         "    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
         "    angle = ((torch.arange(T, dtype=torch.float64) - start)[:, None] * theta).float()\n"
         "    out = torch.empty_like(x)\n"
         "    out[:, 0::2] = x[:, 0::2] * angle.cos() - x[:, 1::2] * angle.sin()\n"
         "    out[:, 1::2] = x[:, 0::2] * angle.sin() + x[:, 1::2] * angle.cos()\n"
         "    return out",
         "rotate(x, 9) turns its rows as if they sat at positions -9 .. -4, not 9 .. 14: the sign of start is flipped"),
        ('check_rotate(rotate, "rotate")',  # the positions counting down from start: both slips at once
         "def rotate(x, start=0):\n"
         "    T, d = x.shape\n"
         "    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
         "    angle = ((start - torch.arange(T, dtype=torch.float64))[:, None] * theta).float()\n"
         "    out = torch.empty_like(x)\n"
         "    out[:, 0::2] = x[:, 0::2] * angle.cos() - x[:, 1::2] * angle.sin()\n"
         "    out[:, 1::2] = x[:, 0::2] * angle.sin() + x[:, 1::2] * angle.cos()\n"
         "    return out",
         "its positions count down from start"),
        ('check_rotate(rotate, "rotate")',  # the wrong way, and start ignored: both named
         "def rotate(x, start=0):\n"
         "    T, d = x.shape\n"
         "    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
         "    angle = (torch.arange(T, dtype=torch.float64)[:, None] * -theta).float()\n"
         "    out = torch.empty_like(x)\n"
         "    out[:, 0::2] = x[:, 0::2] * angle.cos() - x[:, 1::2] * angle.sin()\n"
         "    out[:, 1::2] = x[:, 0::2] * angle.sin() + x[:, 1::2] * angle.cos()\n"
         "    return out",
         "turns each pair the wrong way, by -pos theta_i: compare the signs of your two sines with the block B(alpha) "
         "of R_m above; and rotate(x, 9) is rotate(x)"),
    ],
    "15_todays_decoder_block": [
        ('check_cache_70b(cache_bytes_per_token, cache_gib_4096, mha_over_gqa)',  # two slips at once
         "cache_bytes_per_token = 8 * 128 * 2  # keys only, one layer\n"
         "cache_gib_4096 = mha_over_gqa = 0",
         "count both; and that is one layer: the model has 80"),
        ('check_gqa_from_mha(gqa_from_mha, "gqa_from_mha")',
         "def gqa_from_mha(mha, n_kv_heads):  # the default rotary positions, not the layer's\n"
         "    group, d_k, d_model = mha.n_heads // n_kv_heads, mha.d_k, mha.d_model\n"
         "    gqa = GroupedQueryAttention(d_model, mha.n_heads, n_kv_heads, max_len=mha.rope.max_len)\n"
         "    with torch.no_grad():\n"
         "        gqa.q_proj.weight.copy_(mha.q_proj.weight)\n"
         "        gqa.o_proj.weight.copy_(mha.o_proj.weight)\n"
         "        for part in ('k_proj', 'v_proj'):\n"
         "            rows = getattr(mha, part).weight.view(n_kv_heads, group, d_k, d_model)\n"
         "            getattr(gqa, part).weight.copy_(rows.mean(dim=1).reshape(n_kv_heads * d_k, d_model))\n"
         "    return gqa",
         "with that layer's rotary positions"),
        ('check_swiglu_width(width_exact, width_llama, swiglu_parameters)',  # (a)'s width, not (b)'s
         "width_exact = 13653.33\nwidth_llama = 13824\nswiglu_parameters = 3 * 5120 * 13653",
         "not the exact width of (a)"),
        ('check_swiglu_width(width_exact, width_llama, swiglu_parameters)',  # the 2017 count, 0.002% away
         "width_exact = 13653.33\nwidth_llama = 13824\nswiglu_parameters = 2 * 5120 * 4 * 5120",
         "the 2017 layer's count"),
        ('check_cache_70b(cache_bytes_per_token, cache_gib_4096, mha_over_gqa)',  # the ratio upside down
         "cache_bytes_per_token = 2 * 80 * 8 * 128 * 2\n"
         "cache_gib_4096 = cache_bytes_per_token * 4096 / 2**30\nmha_over_gqa = 1 / 8",
         "how many times larger the multi-head cache is"),
    ],
    "11_cost_of_attention": [
        ('check_scores_mib(scores_mib, "scores_mib")',
         "def scores_mib(n, heads, layers, batch, bytes_per_number):  # the heads left out\n"
         "    return layers * batch * n * n * bytes_per_number / 2**20",
         "every head has its own n x n matrix"),
        ('check_scores_mib(scores_mib, "scores_mib")',
         "def scores_mib(n, heads, layers, batch, bytes_per_number):  # the layers left out\n"
         "    return heads * batch * n * n * bytes_per_number / 2**20",
         "every layer keeps its own weights"),
        ('check_scores_mib(scores_mib, "scores_mib")',
         "def scores_mib(n, heads, layers, batch, bytes_per_number):  # both left out, in MB\n"
         "    return batch * n * n * bytes_per_number / 1e6",
         "MB (10**6 bytes): a MiB is 2**20 bytes; and every layer keeps its own weights; and every head"),
        ('check_scores_mib(scores_mib, "scores_mib")',
         "def scores_mib(n, heads, layers, batch, bytes_per_number):  # float32 taken for granted\n"
         "    return layers * batch * heads * n * n * 4 / 2**20",
         "use bytes_per_number as given"),
        ('check_cache(cache_gib, None)',
         "def cache_gib(positions, batch):  # the keys only\n"
         "    return 32 * batch * positions * 4096 * 2 / 2**30",
         "keys and values: the cache holds both"),
        ('check_cache(cache_gib, cache_bytes)',  # one of the chapter's caches measured, scaled by the positions
         "def cache_gib(positions, batch):\n    return 2 * 32 * batch * positions * 4096 * 2 / 2**30\n"
         "def cache_bytes(positions, n_layers, d_model, bytes_per_number):\n"
         "    measured = sum(t.numel() * t.element_size() for c in caches_at[32] for t in c.values())\n"
         "    return measured * positions / 32",
         "not the bytes of a real cache of such a model"),
        ('check_cache(cache_gib, cache_bytes)',  # the keys only, float32 taken for granted
         "def cache_gib(positions, batch):\n    return 2 * 32 * batch * positions * 4096 * 2 / 2**30\n"
         "def cache_bytes(positions, n_layers, d_model, bytes_per_number):\n"
         "    return n_layers * positions * d_model * 4",
         "keys and values: the cache holds both; and use bytes_per_number as given"),
        ('check_cache(cache_gib, cache_bytes)',  # one layer
         "def cache_gib(positions, batch):\n    return 2 * 32 * batch * positions * 4096 * 2 / 2**30\n"
         "def cache_bytes(positions, n_layers, d_model, bytes_per_number):\n"
         "    return 2 * positions * d_model * bytes_per_number",
         "every layer keeps its own cache"),
        ('check_pp_flops(flops_scores, flops_ffn, length_scores_equal_ffn, t_star_paper)',  # rounded
         "flops_scores = 1.07e9\nflops_ffn = length_scores_equal_ffn = t_star_paper = 0",
         "close, but rounded: a FLOP count is an exact integer"),
        ('check_pp_flops(flops_scores, flops_ffn, length_scores_equal_ffn, t_star_paper)',  # d_model for d_ff
         "flops_scores = 2 * 1024**2 * 512\nflops_ffn = 4 * 1024 * 512 * 512\n"
         "length_scores_equal_ffn = t_star_paper = 0",
         "an FFN of inner width d_model"),
        ('check_pp_flops(flops_scores, flops_ffn, length_scores_equal_ffn, t_star_paper)',  # rounded, in (b)
         "flops_scores = 2 * 1024**2 * 512\nflops_ffn = 4.29e9\nlength_scores_equal_ffn = t_star_paper = 0",
         "close, but rounded"),
        ('check_blockwise_masked(blockwise, "blockwise")',
         "def blockwise(q, k, v, mask, block):  # the online softmax, with the keys where the values belong\n"
         "    top = torch.full(q.shape[:-1] + (1,), float('-inf'))\n"
         "    total = torch.zeros(q.shape[:-1] + (1,))\n"
         "    out = torch.zeros(q.shape[:-1] + (k.shape[-1],))\n"
         "    for s in range(0, k.shape[2], block):\n"
         "        scores = q @ k[:, :, s:s + block].transpose(-2, -1) / q.shape[-1] ** 0.5\n"
         "        scores = scores.masked_fill(~mask[:, s:s + block], float('-inf'))\n"
         "        new_top = torch.maximum(top, scores.amax(-1, keepdim=True))\n"
         "        safe = torch.where(torch.isinf(new_top), torch.zeros_like(new_top), new_top)\n"
         "        weights = torch.exp(scores - safe)\n"
         "        shrink = torch.exp(torch.where(torch.isinf(top), torch.full_like(top, -1e30), top - safe))\n"
         "        total = total * shrink + weights.sum(-1, keepdim=True)\n"
         "        out = out * shrink + weights @ k[:, :, s:s + block]\n"
         "        top = new_top\n"
         "    return out / total.clamp_min(1e-30)",
         "blockwise (causal mask"),
    ],
    "16_training_beyond_one_device": [
        ('check_zero_gb(zero_gb, "zero_gb")',
         "def zero_gb(n_parameters, world_size, stage):  # shards the gradients already at stage 1\n"
         "    weights, gradients, optimizer = 2, 2, 12\n"
         "    if stage >= 1:\n"
         "        optimizer, gradients = optimizer / world_size, gradients / world_size\n"
         "    if stage >= 3:\n"
         "        weights /= world_size\n"
         "    return n_parameters * (weights + gradients + optimizer) / 1e9",
         "that is stage 2's answer: stage 1 shards the optimizer state only"),
        ('check_accumulated(accumulated, "accumulated")',  # divided by every position, padding too
         "def accumulated(model, micro_batches):\n"
         "    model.zero_grad(set_to_none=True)\n"
         "    positions = sum(y.numel() for _, y in micro_batches)\n"
         "    for x, y in micro_batches:\n"
         "        F.cross_entropy(model(x).transpose(1, 2), y, ignore_index=-100,\n"
         "                        reduction='sum').div(positions).backward()\n"
         "    return {n: p.grad.clone() for n, p in model.named_parameters()}",
         "divides by every position, padding included"),
        ('check_accumulated(accumulated, "accumulated")',  # one pass over the whole batch: nothing accumulated
         "def accumulated(model, micro_batches):\n"
         "    model.zero_grad(set_to_none=True)\n"
         "    x = torch.cat([b[0] for b in micro_batches])\n"
         "    y = torch.cat([b[1] for b in micro_batches])\n"
         "    F.cross_entropy(model(x).transpose(1, 2), y, ignore_index=-100).backward()\n"
         "    return {n: p.grad.clone() for n, p in model.named_parameters()}",
         "run it once per micro-batch"),
        ('check_accumulated(accumulated, "accumulated")',  # the right sum, on top of an earlier step's gradients
         "def accumulated(model, micro_batches):\n"
         "    total = sum(int((y != -100).sum()) for _, y in micro_batches)\n"
         "    for x, y in micro_batches:\n"
         "        F.cross_entropy(model(x).transpose(1, 2), y, ignore_index=-100,\n"
         "                        reduction='sum').div(total).backward()\n"
         "    return {n: p.grad.clone() for n, p in model.named_parameters()}",
         "zero them first"),
        ('check_zero_gb(zero_gb, "zero_gb")',  # in GiB
         "def zero_gb(n_parameters, world_size, stage):\n"
         "    shards = [(2, 2, 12), (2, 2, 12 / world_size), (2, 2 / world_size, 12 / world_size),\n"
         "              (2 / world_size, 2 / world_size, 12 / world_size)][stage]\n"
         "    return n_parameters * sum(shards) / 2**30",
         "that is in GiB"),
        ('check_ring(ring_all_reduce_sim, "ring_all_reduce_sim")',  # the local sum, and zeros sent for the count
         "def ring_all_reduce_sim(tensors, send):\n"
         "    n = len(tensors)\n"
         "    for _ in range(2 * (n - 1)):\n"
         "        for r in range(n):\n"
         "            send(r, (r + 1) % n, torch.zeros(len(tensors[r]) // n))\n"
         "    return [sum(tensors) for _ in tensors]",
         "sent values that are no sum of the ranks' chunks (zeros?"),
        ('check_ring(ring_all_reduce_sim, "ring_all_reduce_sim")',  # the local sum, its own chunks sent for the count
         "def ring_all_reduce_sim(tensors, send):\n"
         "    n = len(tensors)\n"
         "    for _ in range(2 * (n - 1)):\n"
         "        for r in range(n):\n"
         "            send(r, (r + 1) % n, tensors[r].chunk(n)[0])\n"
         "    return [sum(tensors) for _ in tensors]",
         "not from the local sum of all tensors"),
        ('check_ring(ring_all_reduce_sim, "ring_all_reduce_sim")',  # the local sum's chunks sent around the ring
         "def ring_all_reduce_sim(tensors, send):\n"
         "    n = len(tensors)\n"
         "    total = sum(tensors)\n"
         "    for step in range(2 * (n - 1)):\n"
         "        for r in range(n):\n"
         "            send(r, (r + 1) % n, total.chunk(n)[(r - step) % n])\n"
         "    return [total.clone() for _ in tensors]",
         "whose chunk never reached it"),
        ('check_ring(ring_all_reduce_sim, "ring_all_reduce_sim")',  # an all-to-all: every chunk to every rank
         "def ring_all_reduce_sim(tensors, send):\n"
         "    n = len(tensors)\n"
         "    chunks = [t.chunk(n) for t in tensors]\n"
         "    got = [[send(q, r, chunks[q][c]) if q != r else chunks[r][c] for q in range(n)]\n"
         "           for r in range(n) for c in range(n)]\n"
         "    return [torch.cat([sum(got[r * n + c]) for c in range(n)]) for r in range(n)]",
         "messages must go to the next rank of the ring"),
        ('check_pp_ring(grad_gb, sent_gb, ratio_64)',  # one phase of the ring only
         "grad_gb, sent_gb, ratio_64 = 2.6, 2.275, 1.125",
         "each rank sends 2 (N - 1) chunks, in the reduce-scatter and again in the all-gather"),
        ('check_pp_ring(grad_gb, sent_gb, ratio_64)',  # float32's 4 bytes a value
         "grad_gb, sent_gb, ratio_64 = 5.2, 9.1, 1.125",
         "bfloat16 gradients take 2 bytes a value, not 4"),
        ('check_pp_ring(grad_gb, sent_gb, ratio_64)',  # both slips: sent_gb right by cancellation, each still named
         "grad_gb, sent_gb, ratio_64 = 5.2, 4.55, 1.125",
         "bfloat16 gradients take 2 bytes a value, not 4"),
        ('check_pp_ring(grad_gb, sent_gb, ratio_64)',  # both slips: the second hint of the same message
         "grad_gb, sent_gb, ratio_64 = 5.2, 4.55, 1.125",
         "sent_gb is 0.875 times your grad_gb: each rank sends 2 (N - 1) chunks"),
        ('check_pp_ring(grad_gb, sent_gb, ratio_64)',  # twice the gradient: (N - 1) / N forgotten
         "grad_gb, sent_gb, ratio_64 = 2.6, 5.2, 1.125",
         "the ring factor is 2 (N - 1) / N, not 2"),
        ('check_accumulated(accumulated, "accumulated")',  # right sums, but a first pass over each micro-batch
         "def accumulated(model, micro_batches):\n"
         "    model.zero_grad(set_to_none=True)\n"
         "    with torch.no_grad():  # a first look at the losses\n"
         "        total = sum(int((y != -100).sum()) for x, y in micro_batches if model(x) is not None)\n"
         "    for x, y in micro_batches:\n"
         "        F.cross_entropy(model(x).transpose(1, 2), y, ignore_index=-100,\n"
         "                        reduction='sum').div(total).backward()\n"
         "    return {n: p.grad.clone() for n, p in model.named_parameters()}",
         "the rule is one forward pass per micro-batch"),
    ],
}


# chapter -> [(exercise label, the learner's answer cell, what the check's message must say)]: the chapter's own check
# cell, run on an answer of the wrong kind, names the kind it wanted and the one it got; the message holds neither the
# right answer nor the hint (which is about the value)
WRONG_KIND = {
    "06_transformer_block": [
        ("ch06-pp-params",
         'attention_parameters = "relu"\nffn_parameters = layer_norm_parameters = 0',
         "attention_parameters should be a whole number (an int), but it is text (a str): 'relu'"),
        ("ch06-pp-params",  # the reasoning typed as the answer
         'attention_parameters = "four d_model x d_model matrices and their biases"\n'
         "ffn_parameters = layer_norm_parameters = 0",
         "attention_parameters should be a whole number (an int), but it is text (a str): 'four d_model x "),
        ("ch06-pp-params",  # the number, in quotes
         "attention_parameters = 4 * (512 * 512 + 512)\nffn_parameters = '2,099,712'\nlayer_norm_parameters = 0",
         "ffn_parameters should be a whole number (an int), but it is text (a str): '2,099,712': write it without "
         "quotes"),
    ],
}

def _namespace(chapter: str, check: str) -> dict:
    """The chapter's cells that its function ``check`` depends on (only that function of its check cell), run in a
    fresh namespace."""
    cells = [c.source for c in nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4).cells
             if c.cell_type == "code"]
    where = next(i for i, source in enumerate(cells) if f"def {check}(" in source)
    tree = ast.parse(cells[where])
    # the check function and the cell's other top-level statements (its data), not the cell's other checks
    kept = [node for node in tree.body if not isinstance(node, ast.FunctionDef) or node.name == check
            or not node.name.startswith(("check_", "try_check"))]
    sources = [part for source in cells[:where] for part in _imports_apart(source)]
    sources.append("\n\n".join(ast.get_source_segment(cells[where], node) for node in kept))
    namespace = {"__name__": "__main__"}
    cwd = Path.cwd()
    os.chdir(ROOT / "chapters")
    try:
        for i in sorted(needed_cells(sources, {len(sources) - 1})):
            if not sources[i].lstrip().startswith(("%", "!")):
                exec(compile(sources[i], f"<{chapter} cell {i}>", "exec"), namespace)
    finally:
        os.chdir(cwd)
        plt.close("all")
    return namespace


def _imports_apart(source: str) -> list[str]:
    """A cell as two: its import statements, then the rest (needed_cells keeps every cell that imports, so a cell
    that imports and also trains a model would otherwise always run)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [source]
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    if not imports or len(imports) == len(tree.body):
        return [source]
    rest = [node for node in tree.body if node not in imports]
    return ["\n".join(ast.get_source_segment(source, node) for node in part) for part in (imports, rest)]


@pytest.fixture(scope="module")
def namespaces() -> dict[tuple[str, str], dict]:
    return {}


@pytest.mark.parametrize(("chapter", "case"), [(ch, k) for ch, cases in ONE_CALL.items() for k in range(len(cases))])
def test_the_one_call_answer_fails_its_check(namespaces, chapter, case):
    call, answer = ONE_CALL[chapter][case]
    check = call.split("(")[0]
    if (chapter, check) not in namespaces:
        namespaces[chapter, check] = _namespace(chapter, check)
    namespace = dict(namespaces[chapter, check])
    exec(answer, namespace)
    with pytest.raises(CheckFailed, match="this exercise asks you to write it yourself"):
        exec(call, namespace)


@pytest.mark.parametrize(("chapter", "case"), [(ch, k) for ch, cases in SLIPS.items() for k in range(len(cases))])
def test_a_named_slip_gets_its_hint(namespaces, chapter, case):
    call, answer, hint = SLIPS[chapter][case]
    check = call.split("(")[0]
    if (chapter, check) not in namespaces:
        namespaces[chapter, check] = _namespace(chapter, check)
    namespace = dict(namespaces[chapter, check])
    exec(answer, namespace)
    with pytest.raises(CheckFailed, match=re.escape(hint)):
        exec(call, namespace)


def _check_cell(chapter: str, label: str) -> tuple[dict, str]:
    """A namespace in which the check cell of exercise ``label`` can run, and that cell's source: the chapter's setup
    cell and its imports, run as in the learner's kernel. (A pencil-and-paper check reads only tfm and the answers;
    one that read more of the chapter would fail here with a NameError, not a CheckFailed.)"""
    cells = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4).cells
    exercise = next(e for e in find_exercises(cells) if e.label == label)
    code = [c.source for c in cells[:exercise.start] if c.cell_type == "code"]
    imports = [part for source in code[1:] for part in _imports_apart(source)[:1] if _only_imports(part)]
    namespace = {"__name__": "__main__"}
    for i, source in enumerate([code[0], *imports]):
        exec(compile(source, f"<{chapter} setup {i}>", "exec"), namespace)
    return namespace, cells[exercise.checks[0]].source



def _only_imports(source: str) -> bool:
    try:
        return all(isinstance(node, ast.Import | ast.ImportFrom) for node in ast.parse(source).body)
    except SyntaxError:  # a cell of IPython magics
        return False

@pytest.mark.parametrize(("chapter", "case"),
                         [(ch, k) for ch, cases in WRONG_KIND.items() for k in range(len(cases))])
def test_an_answer_of_the_wrong_kind_is_told_the_kind(namespaces, chapter, case):
    label, answer, message = WRONG_KIND[chapter][case]
    if (chapter, label) not in namespaces:
        namespaces[chapter, label] = _check_cell(chapter, label)
    namespace, check = namespaces[chapter, label]
    namespace = dict(namespace)
    exec(answer, namespace)  # in place of the learner's answer cell
    with pytest.raises(CheckFailed, match=re.escape(message)) as failed:
        exec(check, namespace)
    said = str(failed.value)
    told = re.sub(r"'[^']*'", "''", said)  # what the check adds to the learner's own text, which it quotes
    assert not re.search(r"1,?050,?624|2,?099,?712|2,?048", told), f"the message gives the answer: {said}"
    assert "W_Q" not in said and "bias of" not in said, f"the message gives the hint: {said}"


def test_each_chapter_is_listed_once():
    """A chapter written twice in ONE_CALL, SLIPS or WRONG_KIND would silently drop the first list's cases."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("ONE_CALL", "SLIPS", "WRONG_KIND"):
            keys = [key.value for key in node.value.keys]
            assert len(keys) == len(set(keys)), f"{node.targets[0].id} lists a chapter twice"
            assert all((ROOT / "chapters" / f"{key}.ipynb").exists() for key in keys)
