"""tfm.chat: the chat template and its response mask, the SFT loss, packing with a block-diagonal causal mask, and
agreement with TRL's SFTTrainer (completion-only loss and packing) on the same batch and model."""

import pytest
import torch
import torch.nn.functional as F

import tfm.chat as chat
from tfm.modern import ModernConfig, ModernLM, from_llama

PAD, BOS, SYSTEM, USER, ASSISTANT, END = range(6)
ROLE_IDS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}
N_WORDS = 20
WORDS = ["<pad>", "<bos>", "<system>", "<user>", "<assistant>", "<end>"] + [f"w{i}" for i in range(N_WORDS)]


def conversation(seed: int, n_user: int, n_answer: int, system: bool = False) -> list:
    """A conversation with random word ids (6 ..) of the given lengths."""
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(6, 6 + N_WORDS, (2 + n_user + n_answer,), generator=g).tolist()
    turns = [("system", words[:2])] if system else []
    return turns + [("user", words[2 : 2 + n_user]), ("assistant", words[2 + n_user :])]


def tiny_modern() -> ModernLM:
    torch.manual_seed(0)
    return ModernLM(ModernConfig(n_vocab=len(WORDS), d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                                 max_len=64)).eval()


# ---------------------------------------------------------------------------------------------- the chat template


def test_response_mask_is_true_exactly_on_the_assistant_text_and_its_end_of_turn():
    turns = [("system", [6]), ("user", [7, 8]), ("assistant", [9, 10]), ("user", [11]), ("assistant", [12])]
    ids, mask = chat.format_chat(turns, ROLE_IDS, END, bos=BOS)
    assert ids.tolist() == [BOS, SYSTEM, 6, END, USER, 7, 8, END, ASSISTANT, 9, 10, END, USER, 11, END,
                            ASSISTANT, 12, END]
    expected = [False] * 9 + [True, True, True] + [False] * 4 + [True, True]  # not the role token, yes its <end>
    assert mask.tolist() == expected and mask.dtype == torch.bool and ids.dtype == torch.long


def test_generation_prompt_is_the_conversation_up_to_the_assistant_role_token():
    turns = conversation(0, 3, 4, system=True)
    full = chat.format_chat(turns, ROLE_IDS, END)
    prompt = chat.format_chat(turns[:-1], ROLE_IDS, END, generation_prompt=True)
    assert prompt.ids.tolist() + turns[-1][1] + [END] == full.ids.tolist()
    assert not prompt.response_mask.any() and full.response_mask[len(prompt.ids) :].all()
    assert not full.response_mask[: len(prompt.ids)].any()  # the response is exactly what follows the prompt


def test_bad_conversations_get_errors_that_name_the_problem():
    with pytest.raises(ValueError, match=r"no assistant turn \(roles \['system', 'user'\]\)"):
        chat.format_chat([("system", [6]), ("user", [7])], ROLE_IDS, END)
    with pytest.raises(ValueError, match=r"turn 1 has the unknown role 'bot'.*\('system', 'user', 'assistant'\)"):
        chat.format_chat([("user", [6]), ("bot", [7])], ROLE_IDS, END)
    with pytest.raises(ValueError, match=r"turn 1 \(assistant\) is empty"):
        chat.format_chat([("user", [6]), ("assistant", [])], ROLE_IDS, END)
    with pytest.raises(ValueError, match=r"missing \['assistant'\]"):
        chat.format_chat([("user", [6]), ("assistant", [7])], {"system": 2, "user": 3}, END)
    with pytest.raises(ValueError, match=r"turn 0 \(user\) holds the template's own ids \[5\]"):
        chat.format_chat([("user", [6, END, 10]), ("assistant", [7])], ROLE_IDS, END)


# ------------------------------------------------------------------------------------------------------ the loss


def test_sft_loss_predicts_the_next_token_and_scores_only_the_response():
    """Logits that put all their mass on the NEXT token give a loss near 0; on the same token, a large one."""
    targets = torch.tensor([[3, 7, 8, 5, 4, 9, 5]])  # (1, T)
    response = torch.tensor([[False] * 5 + [True, True]])
    next_token = F.one_hot(targets[:, 1:], len(WORDS)).float() * 30  # (1, T - 1, n_vocab)
    shifted = torch.cat([next_token, torch.zeros(1, 1, len(WORDS))], dim=1)  # (1, T, n_vocab): position t -> t + 1
    assert chat.sft_loss(shifted, targets, response) < 1e-6
    assert chat.sft_loss(F.one_hot(targets, len(WORDS)).float() * 30, targets, response) > 10
    logits = torch.randn(2, 7, len(WORDS), generator=torch.Generator().manual_seed(0))  # (B, T, n_vocab)
    targets = targets.repeat(2, 1)
    response = torch.tensor([[False] * 5 + [True] * 2, [False] * 3 + [True] * 4])
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), targets[:, 1:], reduction="none")  # (B, T - 1)
    assert torch.allclose(chat.sft_loss(logits, targets, response), ce[response[:, 1:]].mean())
    assert torch.allclose(chat.sft_loss(logits, targets, response, completion_only=False), ce.mean())
    assert torch.allclose(chat.sft_loss(logits, targets, response, reduction="sum"), ce[response[:, 1:]].sum())
    # the mean is over the batch's 6 scored tokens, not the mean of the two rows' means
    per_row = (ce * response[:, 1:]).sum(1) / response[:, 1:].sum(1)
    assert (chat.sft_loss(logits, targets, response) - per_row.mean()).abs() > 1e-3


def test_sft_loss_refuses_bad_inputs():
    logits, targets = torch.zeros(1, 4, 8), torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=r"response_mask must be a boolean \(B, T\) = \(1, 4\).*torch.int64"):
        chat.sft_loss(logits, targets, torch.ones(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"targets \(1, 3\)"):
        chat.sft_loss(logits, targets[:, :3], torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="no token to score"):  # only token 0 is a response token: no one predicts it
        chat.sft_loss(logits, targets, torch.tensor([[True, False, False, False]]))
    with pytest.raises(ValueError, match="reduction must be.*'none'"):
        chat.sft_loss(logits, targets, torch.ones(1, 4, dtype=torch.bool), reduction="none")


# ------------------------------------------------------------------------------------------------------- packing


def test_pack_is_first_fit_in_order_with_positions_restarting_for_each_document():
    examples = [(list(range(10, 10 + n)), [True] * n) for n in (5, 4, 3, 2)]
    packed = chat.pack(examples, context=8, pad_id=PAD)
    # 5 opens row 0 (3 left); 4 does not fit, opens row 1 (4 left); 3 fills row 0; 2 goes to row 1
    assert packed.document_ids.tolist() == [[0] * 5 + [2] * 3, [1] * 4 + [3] * 2 + [-1] * 2]
    assert packed.positions.tolist() == [[0, 1, 2, 3, 4, 0, 1, 2], [0, 1, 2, 3, 0, 1, 0, 0]]
    assert packed.tokens.tolist() == [[10, 11, 12, 13, 14, 10, 11, 12], [10, 11, 12, 13, 10, 11, PAD, PAD]]
    first = packed.positions == 0
    assert not packed.response_mask[first].any() and packed.response_mask[~first & (packed.document_ids >= 0)].all()
    assert packed.token_mask.tolist() == [[False, True, True, True, True, False, True, True],
                                          [False, True, True, True, False, True, False, False]]


def test_pack_refuses_what_it_cannot_pack():
    fits = ([1, 2], [False, True])
    with pytest.raises(ValueError, match=r"example 2 has 9 tokens, more than the context of 8"):
        chat.pack([fits, fits, (list(range(9)), [True] * 9)], context=8)
    with pytest.raises(ValueError, match=r"example 1 has 2 ids and 1 mask entries"):
        chat.pack([fits, ([1, 2], [True])], context=8)
    with pytest.raises(ValueError, match=r"example 0 has 0 ids"):
        chat.pack([([], [])], context=8)
    with pytest.raises(ValueError, match="empty list"):
        chat.pack([], context=8)
    with pytest.raises(ValueError, match="context must be a positive int.*0"):
        chat.pack([fits], context=0)


def test_packed_attention_mask_is_block_diagonal_causal_and_padding_sees_nothing():
    documents = torch.tensor([[0, 0, 0, 2, 2, -1], [1, 1, 3, -1, -1, -1]])
    mask = chat.packed_attention_mask(documents)  # (B, T, T)
    expected = torch.tensor([[[i >= j and d[i] == d[j] and d[i] >= 0 for j in range(6)] for i in range(6)]
                             for d in documents.tolist()])
    assert mask.dtype == torch.bool and torch.equal(mask, expected)
    assert not mask[documents < 0].any() and not mask.transpose(1, 2)[documents < 0].any()
    with pytest.raises(ValueError, match=r"integer \(B, T\), got torch.float32 \(6,\)"):
        chat.packed_attention_mask(torch.zeros(6))


def packed_batch(context: int = 24):
    examples = [chat.format_chat(conversation(s, n_user, n_answer, system=s % 2 == 0), ROLE_IDS, END)
                for s, (n_user, n_answer) in enumerate([(3, 5), (6, 2), (2, 2), (4, 7), (1, 3), (5, 1)])]
    return examples, chat.pack(examples, context)


def test_packed_logits_and_losses_equal_each_example_run_alone():
    """A ModernLM on the packed rows, with the block mask and restarted positions, gives each example's logits as if
    it ran alone (max difference ~1e-6 in float32); the summed SFT loss is the sum of the examples' losses."""
    model = tiny_modern()
    examples, packed = packed_batch()
    assert packed.tokens.shape[0] < len(examples)  # several examples do share a row
    with torch.no_grad():
        logits = model(packed.tokens, mask=chat.packed_attention_mask(packed.document_ids),
                       positions=packed.positions)  # (B, T, n_vocab)
        alone = [model(ids[None]) for ids, _ in examples]  # (1, T_i, n_vocab) each
    for i, one in enumerate(alone):
        assert (logits[packed.document_ids == i] - one[0]).abs().max() < 1e-5, i
    assert torch.isfinite(logits).all()  # padding rows attend to nothing and still give numbers
    mask = chat.packed_attention_mask(packed.document_ids)  # (B, T, T)
    logits, weights = model(packed.tokens, need_weights=True, mask=mask, positions=packed.positions)
    assert all(w.transpose(1, 2)[packed.document_ids < 0].abs().sum() == 0 for w in weights)  # (B, T, h, S): zeros
    chat.sft_loss(logits, packed.tokens, packed.response_mask, token_mask=packed.token_mask).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())  # and no NaN in the backward pass
    for completion_only in (True, False):
        summed = chat.sft_loss(logits, packed.tokens, packed.response_mask, completion_only, packed.token_mask, "sum")
        each = sum(chat.sft_loss(one, ids[None], mask[None], completion_only, reduction="sum")
                   for one, (ids, mask) in zip(alone, examples, strict=True))
        assert torch.allclose(summed, each, rtol=1e-5), (completion_only, summed, each)
        n_scored = sum(int(m[1:].sum()) if completion_only else len(m) - 1 for _, m in examples)
        mean = chat.sft_loss(logits, packed.tokens, packed.response_mask, completion_only, packed.token_mask)
        assert torch.allclose(mean, each / n_scored, rtol=1e-5)


def test_without_the_block_mask_packed_documents_read_each_other():
    """Plain causal attention over a packed row lets a document read the ones before it: its logits change. The
    first document of each row is unaffected (nothing comes before it). With the block mask but positions that run
    on across the row, the logits still agree up to rounding: rotary positions make scores depend on differences of
    positions only, so it is the mask, not the restart, that keeps documents apart here (a model with an absolute
    position table would need both). Hugging Face reads document boundaries from the position ids, so they still
    matter there (see the TRL packing test)."""
    model = tiny_modern()
    _, packed = packed_batch()
    blocks = chat.packed_attention_mask(packed.document_ids)  # (B, T, T)
    with torch.no_grad():
        right = model(packed.tokens, mask=blocks, positions=packed.positions)  # (B, T, n_vocab)
        causal = model(packed.tokens)  # (B, T, n_vocab): plain causal, positions 0 .. T - 1
        running_positions = model(packed.tokens, mask=blocks)
    first = packed.document_ids == packed.document_ids[:, :1]
    later = ~first & (packed.document_ids >= 0)
    assert later.any()
    assert (right[first] - causal[first]).abs().max() < 1e-5
    assert (right[later] - causal[later]).abs().amax(-1).min() > 1e-3  # every later token's logits change
    assert (right[later] - running_positions[later]).abs().max() < 1e-4


def test_per_token_positions_reach_the_rotary_embedding_and_the_mask_only_narrows_the_causal_one():
    """Each row rotated at its own positions equals that row rotated from its own start; every token at position 0
    makes one layer of attention blind to order (the last token's logits ignore a shuffle of the earlier ones; with
    two layers the causal mask alone would tell order); a mask that allows everything leaves the model causal."""
    rope = tiny_modern().layers[0].self_attn.rope
    x = torch.randn(2, 4, 6, 8, generator=torch.Generator().manual_seed(0))  # (B, h, T, d_k)
    positions = torch.stack([torch.arange(3, 9), torch.arange(6)])  # (B, T)
    assert torch.equal(rope(x, positions=positions), torch.stack([rope(x[0], 3), rope(x[1], 0)]))
    torch.manual_seed(0)
    model = ModernLM(ModernConfig(n_vocab=len(WORDS), d_model=32, n_layers=1, max_len=64)).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(6, len(WORDS), (1, 10), generator=g)  # (1, T)
    shuffled = torch.cat([ids[:, :-1][:, torch.randperm(9, generator=g)], ids[:, -1:]], dim=1)
    zeros = torch.zeros_like(ids)
    with torch.no_grad():
        assert (model(ids, positions=zeros)[0, -1] - model(shuffled, positions=zeros)[0, -1]).abs().max() < 1e-6
        assert (model(ids)[0, -1] - model(shuffled)[0, -1]).abs().max() > 1e-4  # ~7e-4 at init's small weights
        everything = torch.ones(1, 10, 10, dtype=torch.bool)
        assert torch.equal(model(ids, mask=everything), model(ids))


def test_modern_lm_refuses_a_bad_mask_or_positions():
    model, ids = tiny_modern(), torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"mask must be boolean \(B, T, S\) = \(2, 5, 5\).*torch.int64 \(2, 5, 5\)"):
        model(ids, mask=torch.ones(2, 5, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"positions must be integers in \[0, max_len=64\).*shape \(2, 4\)"):
        model(ids, positions=torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"max_len=64"):
        model(ids, positions=torch.full((2, 5), 64))


# ----------------------------------------------------------------------------------------------------------- TRL

# TRL's SFTConfig sets gradient_checkpointing, which transformers 5.23 renames activation_checkpointing (FutureWarning)
trl_warning = pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")


def trl_setup(tmp_path, conversations, **config):
    """A tiny random LlamaForCausalLM, a word-level tokenizer over WORDS and TRL's SFTTrainer on a prompt/completion
    dataset written from tfm's template: prompt = the generation prompt, completion = the answer and its <end>."""
    from datasets import Dataset, disable_progress_bars
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import SFTConfig, SFTTrainer

    disable_progress_bars()
    word_level = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=word_level, pad_token="<pad>", eos_token="<end>")
    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=64, pad_token_id=PAD, eos_token_id=END)).eval()

    def text(ids):
        return " ".join(WORDS[i] for i in ids)

    prompts = [chat.format_chat(turns[:-1], ROLE_IDS, END, generation_prompt=True).ids.tolist()
               for turns in conversations]
    data = Dataset.from_dict({"prompt": [text(p) for p in prompts],
                              "completion": [" " + text(turns[-1][1] + [END]) for turns in conversations]})
    args = SFTConfig(output_dir=str(tmp_path), report_to=[], completion_only_loss=True, use_cpu=True,
                     per_device_train_batch_size=len(conversations), **config)
    trainer = SFTTrainer(model=llama, args=args, train_dataset=data, processing_class=tokenizer)
    rows = [trainer.train_dataset[i] for i in range(len(trainer.train_dataset))]
    return trainer, llama, trainer.data_collator(rows)


@trl_warning
def test_completion_only_loss_equals_trl_sft_trainer(tmp_path):
    """TRL 1.16 (prompt/completion data, completion_only_loss=True) marks the completion by tokenizing the prompt
    alone: completion_mask = 0 on its tokens, 1 after them; labels = -100 there and on padding. Its loss (the fused LM
    head in trl.trainer.utils) shifts the labels inside (labels[:, 1:]) and divides the summed -log p by the number of
    scored tokens of the whole batch (num_items_in_batch in training: Trainer counts labels[..., 1:] != -100 over the
    accumulated batches, the same count for one batch), so it is a token mean, not a mean of per-sequence means.
    That is tfm's sft_loss: masks equal exactly, the loss within 1e-6 (measured 2.4e-7) on Llama's logits and on
    from_llama's ModernLM alike. No difference remains."""
    conversations = [conversation(s, n_user, n_answer, system=s == 1)
                     for s, (n_user, n_answer) in enumerate([(3, 5), (6, 1), (2, 3)])]
    trainer, llama, batch = trl_setup(tmp_path, conversations)
    examples = [chat.format_chat(turns, ROLE_IDS, END) for turns in conversations]
    T = max(len(ids) for ids, _ in examples)
    ids = torch.stack([F.pad(ids, (0, T - len(ids)), value=PAD) for ids, _ in examples])  # (B, T)
    response = torch.stack([F.pad(mask, (0, T - len(mask))) for _, mask in examples])  # (B, T)
    real = batch["attention_mask"].bool()  # (B, T)
    assert torch.equal(batch["input_ids"], ids)
    assert torch.equal(batch["labels"] != -100, response)  # TRL's completion mask = tfm's response mask
    with torch.no_grad():
        trl_loss = trainer.compute_loss(trainer.model, dict(batch))
        hf_logits = llama(input_ids=ids, attention_mask=batch["attention_mask"]).logits  # (B, T, n_vocab)
        modern_logits = from_llama(llama)(ids)  # (B, T, n_vocab): right padding, causal: real tokens unaffected
    assert (chat.sft_loss(hf_logits, ids, response, token_mask=real) - trl_loss).abs() < 1e-6
    assert (chat.sft_loss(modern_logits, ids, response, token_mask=real) - trl_loss).abs() < 1e-6
    per_sequence = torch.stack([chat.sft_loss(hf_logits[b : b + 1], ids[b : b + 1], response[b : b + 1])
                                for b in range(len(examples))]).mean()
    assert (per_sequence - trl_loss).abs() > 1e-3  # TRL does not average per sequence


@trl_warning
def test_trl_packing_is_best_fit_decreasing_with_positions_that_restart_like_tfms(tmp_path):
    """TRL 1.16's packing=True defaults to packing_strategy="bfd": best fit decreasing (longest example first, each
    into the row whose free space fits it most tightly; longer ones are truncated), which turns padding_free on: the
    collator concatenates the batch's rows into ONE row with no padding and position_ids that restart at 0 for each
    example, and sets labels to -100 where position_ids == 0. Transformers then finds the document boundaries from
    the position ids (masking_utils.find_packed_sequence_indices) and builds the block-diagonal causal mask, also on
    the CPU. Examples of 8, 8, 12, 12 tokens in rows of 20: TRL makes 2 full rows (12 + 8 each); tfm's first fit in
    order makes 3 (8 + 8, 12, 12). Positions, scored tokens and the loss (within 1e-6, measured 2.4e-7) agree with
    tfm's packing of TRL's rows. Without the position ids the same flattened row is read plain causal and the loss
    changes."""
    conversations = [conversation(s, n_user, n_answer) for s, (n_user, n_answer) in enumerate([(2, 2), (3, 1), (4, 4),
                                                                                            (2, 6)])]
    examples = [chat.format_chat(turns, ROLE_IDS, END) for turns in conversations]
    assert [len(ids) for ids, _ in examples] == [8, 8, 12, 12]
    trainer, llama, batch = trl_setup(tmp_path, conversations, packing=True, max_length=20)
    assert trainer.args.packing_strategy == "bfd" and trainer.padding_free
    trl_rows = [trainer.train_dataset[i]["seq_lengths"] for i in range(len(trainer.train_dataset))]
    assert sorted(trl_rows) == [[12, 8], [12, 8]]
    assert chat.pack(examples, context=20).tokens.shape[0] == 3
    # tfm packing the examples in TRL's order puts them in TRL's rows; its positions and masks are TRL's
    by_ids, order = {tuple(ids.tolist()): i for i, (ids, _) in enumerate(examples)}, []
    for r, lengths in enumerate(trl_rows):
        row, ends = trainer.train_dataset[r]["input_ids"], torch.tensor(lengths).cumsum(0).tolist()
        order += [by_ids[tuple(row[end - n : end])] for n, end in zip(lengths, ends, strict=True)]
    assert sorted(order) == [0, 1, 2, 3] and [len(examples[i].ids) for i in order] == [12, 8, 12, 8]
    packed = chat.pack([examples[i] for i in order], context=20)
    real = packed.document_ids >= 0
    assert batch["input_ids"].shape[0] == 1 and torch.equal(batch["input_ids"][0], packed.tokens[real])
    assert torch.equal(batch["position_ids"][0], packed.positions[real])
    assert torch.equal(batch["labels"][0] != -100, packed.response_mask[real])
    with torch.no_grad():
        trl_loss = trainer.compute_loss(trainer.model, dict(batch))
        logits = from_llama(llama)(packed.tokens, mask=chat.packed_attention_mask(packed.document_ids),
                                   positions=packed.positions)  # (B, T, n_vocab)
        flat = llama(input_ids=batch["input_ids"]).logits  # (1, T, n_vocab): no position ids, so plain causal
    tfm_loss = chat.sft_loss(logits, packed.tokens, packed.response_mask, token_mask=packed.token_mask)
    assert (tfm_loss - trl_loss).abs() < 1e-6
    across = chat.sft_loss(flat, batch["input_ids"], batch["labels"] != -100)
    assert (across - trl_loss).abs() > 1e-3  # Hugging Face reads the boundaries from the position ids alone
