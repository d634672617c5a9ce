"""tfm.preference against TRL 1.16's own trainers on the same batches, and the properties the chapter leans on.

DPO: a ``DPOTrainer`` built offline (a random Llama, a second one as the reference, a word-level tokenizer made
here, a three-pair in-memory dataset); its collator's batch goes through its ``compute_loss`` and, beside it, through
the same two models' logits into :func:`tfm.preference.dpo_loss`. GRPO: a ``GRPOTrainer`` with a reward function
written here samples and scores its own completions (``_generate_and_score_completions``, what a training step
does first: generation, rewards, advantages, old and reference log-probabilities); then the policy is moved, as
after an optimiser step, so that ratios leave 1 and clipping acts, and the trainer's ``compute_loss`` on that batch
is compared with :func:`tfm.preference.grpo_loss` from the model's logits. ``num_iterations=2`` makes TRL compute the
old log-probabilities itself (with one iteration it takes them to equal the current ones).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tfm.preference import dpo_loss, group_advantages, grpo_loss, sequence_logprobs, token_logprobs

TOL = 1e-6  # float32; the largest difference measured against TRL was under 1e-7


# --- properties, no TRL needed ---------------------------------------------------------------------------------

def test_sequence_logprobs_sums_the_response_tokens():
    torch.manual_seed(0)
    logits, targets = torch.randn(2, 5, 7), torch.randint(0, 7, (2, 5))
    mask = torch.tensor([[False, False, True, True, True], [False, True, True, False, False]])
    per_token = -F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
    assert torch.allclose(token_logprobs(logits, targets), per_token, atol=1e-6)
    expected = torch.stack([per_token[0, 2:].sum(), per_token[1, 1:3].sum()])
    assert torch.allclose(sequence_logprobs(logits, targets, mask), expected, atol=1e-6)
    padded = targets.masked_fill(~mask, -100)  # the ignore index under the mask does not matter
    assert torch.allclose(sequence_logprobs(logits, padded, mask), expected, atol=1e-6)


def test_dpo_loss_is_ln2_at_the_reference_and_falls_with_the_margin():
    logps = torch.tensor([-12.0, -3.5, -40.0])
    loss, chosen, rejected = dpo_loss(logps, logps - 2, logps, logps - 2, beta=0.1)
    assert abs(loss.item() - math.log(2)) < 1e-6
    assert chosen.abs().max() == 0 and rejected.abs().max() == 0
    ref = torch.zeros(3)
    losses = [dpo_loss(ref + m, ref, ref, ref, beta=0.5)[0].item() for m in (-2.0, -0.5, 0.0, 0.5, 2.0, 8.0)]
    assert all(a > b for a, b in zip(losses[:-1], losses[1:], strict=True)), losses
    assert abs(losses[-1] - math.log1p(math.exp(-4.0))) < 1e-6  # −log σ(β · margin) with β · margin = 4
    _, chosen, rejected = dpo_loss(ref + 3, ref - 1, ref + 1, ref, beta=0.5)
    assert torch.allclose(chosen, torch.full((3,), 1.0)) and torch.allclose(rejected, torch.full((3,), -0.5))


def test_group_advantages_by_hand():
    equal = group_advantages(torch.tensor([2.0, 2.0, 2.0, 0.0, 1.0, 5.0]), group_size=3)
    assert equal[:3].abs().max() == 0  # all answers equally good: nothing to learn from this prompt
    pair = group_advantages(torch.tensor([1.0, 3.0]), group_size=2, eps=0.0)
    # Bessel's correction: the std of {1, 3} is √2 (not 1), so the advantages are ∓1/√2 (not ∓1)
    assert torch.allclose(pair, torch.tensor([-1.0, 1.0]) / math.sqrt(2))
    assert torch.allclose(group_advantages(torch.tensor([1.0, 3.0, 0.0, 4.0]), 2, scale=False),
                          torch.tensor([-1.0, 1.0, -2.0, 2.0]))


def test_grpo_loss_by_hand():
    mask = torch.ones(1, 1, dtype=torch.bool)
    zero = torch.zeros(1, 1)

    def loss(ratio, advantage, **kw):
        return grpo_loss(torch.log(torch.tensor([[ratio]])), zero, zero, torch.tensor([advantage]), mask, **kw)

    assert abs(loss(1.5, 1.0, beta=0.0).item() + 1.2) < 1e-6  # clipped at 1 + ε: the gain stops
    assert abs(loss(1.1, 1.0, beta=0.0).item() + 1.1) < 1e-6  # inside the band: r · A
    assert abs(loss(0.5, -1.0, beta=0.0).item() - 0.8) < 1e-6  # A < 0: clipped at 1 − ε
    assert abs(loss(1.5, -1.0, beta=0.0).item() - 1.5) < 1e-6  # A < 0, r > 1 + ε: not clipped, the penalty stays
    q = -math.log(1.5)  # log π_ref − log π
    k3 = math.exp(q) - q - 1
    assert abs(loss(1.5, 1.0, beta=0.1, kl_ratio=False).item() - (-1.2 + 0.1 * k3)) < 1e-6
    assert abs(loss(1.5, 1.0, beta=0.1).item() - (-1.2 + 0.1 * 1.5 * k3)) < 1e-6  # TRL's default: r · k3
    # "grpo" averages each response over its tokens, "dapo" over all tokens of the batch
    logps = torch.zeros(2, 3)
    ragged = torch.tensor([[True, False, False], [True, True, True]])
    advantages = torch.tensor([3.0, 1.0])
    assert abs(grpo_loss(logps, logps, None, advantages, ragged, beta=0.0).item() + 6 / 4) < 1e-6
    assert abs(grpo_loss(logps, logps, None, advantages, ragged, beta=0.0, loss_type="grpo").item() + 2) < 1e-6
    inf_padding = torch.tensor([[0.0, -math.inf, -math.inf], [0.0, 0.0, 0.0]])
    assert torch.isfinite(grpo_loss(inf_padding, logps, logps, advantages, ragged))  # masked values never leak


def _ok():
    logps, mask = torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)
    return dict(logps=logps, old_logps=logps, ref_logps=logps, advantages=torch.zeros(2), mask=mask)


@pytest.mark.parametrize("call, match", [
    (lambda: token_logprobs(torch.zeros(2, 7), torch.zeros(2, dtype=torch.long)), r"\(B, T, n_vocab\), got \(2, 7\)"),
    (lambda: token_logprobs(torch.zeros(2, 3, 7), torch.zeros(2, 4, dtype=torch.long)), r"targets \(2, 4\)"),
    (lambda: token_logprobs(torch.zeros(1, 2, 7), torch.tensor([[3, 7]])), r"\[0, 7\), got values in \[3, 7\]"),
    (lambda: sequence_logprobs(torch.zeros(1, 2, 7), torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2)),
     "boolean.*torch.float32"),
    (lambda: sequence_logprobs(torch.zeros(1, 2, 7), torch.zeros(1, 2, dtype=torch.long),
                               torch.ones(1, 3, dtype=torch.bool)), r"mask has shape \(1, 3\).*\(1, 2\)"),
    (lambda: dpo_loss(*torch.zeros(4, 2), beta=0.0), "beta must be > 0.*got 0.0"),
    (lambda: dpo_loss(*torch.zeros(4, 2), beta=-0.1), "got -0.1"),
    (lambda: dpo_loss(torch.zeros(2, 1), *torch.zeros(3, 2, 1)), r"shape \(B,\).*got \(2, 1\)"),
    (lambda: dpo_loss(torch.zeros(2), torch.zeros(3), torch.zeros(2), torch.zeros(2)), r"policy_rejected.*\(3,\)"),
    (lambda: group_advantages(torch.zeros(4), group_size=1), "group_size must be an int >= 2.*got 1"),
    (lambda: group_advantages(torch.zeros(4), group_size=2.0), "got 2.0"),
    (lambda: group_advantages(torch.zeros(7), group_size=3), "7 rewards.*group_size=3"),
    (lambda: group_advantages(torch.zeros(2, 2), group_size=2), r"\(N,\).*got \(2, 2\)"),
    (lambda: group_advantages(torch.zeros(4), group_size=2, eps=-1.0), "eps must be >= 0, got -1.0"),
    (lambda: grpo_loss(**_ok(), loss_type="bnpo"), r"\('dapo', 'grpo'\), got 'bnpo'"),
    (lambda: grpo_loss(**_ok(), epsilon=0.0), r"epsilon must lie in \(0, 1\).*got 0.0"),
    (lambda: grpo_loss(**_ok(), epsilon=1.5), "got 1.5"),
    (lambda: grpo_loss(**_ok(), beta=-0.04), "beta must be >= 0.*got -0.04"),
    (lambda: grpo_loss(**{**_ok(), "ref_logps": None}, beta=0.04), "beta=0.04 > 0 needs ref_logps"),
    (lambda: grpo_loss(**{**_ok(), "logps": torch.zeros(6)}), r"logps must have shape \(B, T\).*got \(6,\)"),
    (lambda: grpo_loss(**{**_ok(), "old_logps": torch.zeros(2, 4)}), r"old_logps has shape \(2, 4\)"),
    (lambda: grpo_loss(**{**_ok(), "ref_logps": torch.zeros(3, 3)}), r"ref_logps has shape \(3, 3\)"),
    (lambda: grpo_loss(**{**_ok(), "advantages": torch.zeros(2, 3)}), r"\(B,\) = \(2,\).*got \(2, 3\)"),
    (lambda: grpo_loss(**{**_ok(), "mask": torch.ones(2, 3, dtype=torch.long)}), "boolean.*torch.int64"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- against TRL's trainers --------------------------------------------------------------------------------------

WORDS = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(20)]


@pytest.fixture(scope="module")
def trl():
    import trl  # requirements.txt pins it (and datasets): the reference, never skipped
    return trl


@pytest.fixture(scope="module")
def tokenizer(trl):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=words, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def tiny_llama(seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(WORDS), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.1, pad_token_id=0,
                         eos_token_id=1, bos_token_id=None)
    return LlamaForCausalLM(config)


def quiet_config(config_class, tmp_path, **kw):
    """Float32 on the CPU, no logging anywhere. TRL's configs default to bf16 and to gradient checkpointing (named
    activation checkpointing in transformers 5)."""
    return config_class(output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=False,
                        activation_checkpointing=False, disable_tqdm=True, seed=0, **kw)


def test_dpo_loss_equals_trl(trl, tokenizer, tmp_path):
    from datasets import Dataset

    data = Dataset.from_dict({"prompt": ["w1 w2", "w3", "w4 w5 w6"],
                              "chosen": [" w7 w8", " w9", " w10 w11 w12"],
                              "rejected": [" w13", " w14 w15 w16", " w17 w18"]})
    policy, reference = tiny_llama(0), tiny_llama(1)
    args = quiet_config(trl.DPOConfig, tmp_path, per_device_train_batch_size=3, beta=0.1, max_length=None)
    trainer = trl.DPOTrainer(model=policy, ref_model=reference, args=args, train_dataset=data,
                             processing_class=tokenizer)
    assert not args.gradient_checkpointing and not args.bf16
    assert trainer.loss_types == ["sigmoid"] and trainer.label_smoothing == 0.0 and trainer.ld_alpha is None
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(3)])
    with torch.no_grad():
        theirs = trainer.compute_loss(trainer.model, batch)
        ids, mask = batch["input_ids"], batch["completion_mask"].bool()  # (2B, T): the chosen rows, then the rejected
        # TRL patches the forward to return log-probabilities; without fused_lm_head=True it is the model's own
        logps = [sequence_logprobs(model(input_ids=ids, attention_mask=batch["attention_mask"]).logits[:, :-1],
                                   ids[:, 1:], mask[:, 1:]) for model in (trainer.model, trainer.ref_model)]
    policy_chosen, policy_rejected = logps[0].chunk(2)
    ref_chosen, ref_rejected = logps[1].chunk(2)
    ours, chosen_rewards, rejected_rewards = dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, 0.1)
    assert abs(ours.item() - math.log(2)) > 1e-3  # two different models: a loss away from ln 2
    assert abs(ours.item() - theirs.item()) < TOL, (ours.item(), theirs.item())
    logged = trainer._metrics["train"]
    assert abs(chosen_rewards.mean().item() - logged["rewards/chosen"][-1]) < TOL
    assert abs(rejected_rewards.mean().item() - logged["rewards/rejected"][-1]) < TOL


def grpo_batch(trl, tokenizer, tmp_path, beta: float, loss_type: str = "dapo", num_generations: int = 4,
               **config):
    """A GRPOTrainer's own batch of sampled, scored completions, and the rewards its reward function gave them."""
    from datasets import Dataset

    tiny_llama(0).save_pretrained(tmp_path / "policy")  # a path: with beta > 0 TRL loads the reference from it
    rewards = []

    def reward(prompts, completions, completion_ids, **kwargs):
        scores = [sum(ids) / (1 + len(ids)) for ids in completion_ids]  # anything that varies within a group
        rewards.extend(scores)
        return scores

    prompts = ["w1 w2", "w3 w4 w5"]
    args = quiet_config(trl.GRPOConfig, tmp_path / "out", per_device_train_batch_size=len(prompts) * num_generations,
                        num_generations=num_generations, max_completion_length=6, beta=beta, num_iterations=2,
                        **({} if loss_type == "dapo" else {"loss_type": loss_type}), **config)
    trainer = trl.GRPOTrainer(model=str(tmp_path / "policy"), reward_funcs=reward, args=args,
                              train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tokenizer)
    assert trainer.loss_type == loss_type and trainer.scale_rewards == "group" and trainer.epsilon_high == 0.2
    assert trainer.importance_sampling_level == "token" and trainer.args.delta is None and trainer.temperature == 1
    torch.manual_seed(2)
    if trainer.ref_model is not None:  # a reference unlike the sampling policy, so that the two cannot be swapped
        with torch.no_grad():
            for p in trainer.ref_model.parameters():
                p.add_(0.05 * torch.randn_like(p))
    # the sampler's order: each prompt num_generations times in a row, one group after the other
    batch = trainer._generate_and_score_completions([{"prompt": p} for p in prompts for _ in range(num_generations)])
    return trainer, batch, torch.tensor(rewards)


def test_group_advantages_equal_trl(trl, tokenizer, tmp_path):
    _, batch, rewards = grpo_batch(trl, tokenizer, tmp_path, beta=0.0, num_generations=4)
    ours = group_advantages(rewards, group_size=4)
    assert rewards.view(2, 4).std(-1).min() > 0.1  # rewards that differ within each group
    assert (ours - batch["advantages"]).abs().max() < TOL
    population_std = group_advantages(rewards, 4, scale=False) / (rewards.view(2, 4).std(-1, correction=0) + 1e-4
                                                                  ).repeat_interleave(4)
    assert (population_std - batch["advantages"]).abs().max() > 0.1  # without Bessel's correction: not TRL's


@pytest.mark.parametrize("beta, loss_type, kl_ratio", [(0.0, "dapo", True), (0.04, "dapo", True),
                                                       (0.04, "grpo", False)])
def test_grpo_loss_equals_trl(trl, tokenizer, tmp_path, beta, loss_type, kl_ratio):
    """TRL's defaults (loss_type="dapo", use_bias_correction_kl=True) with and without the KL term, and the paper's
    loss (loss_type="grpo", no ratio on the KL term)."""
    trainer, batch, _ = grpo_batch(trl, tokenizer, tmp_path, beta, loss_type, use_bias_correction_kl=kl_ratio)
    torch.manual_seed(3)
    with torch.no_grad():  # as after an optimiser step: the policy is no longer the one that sampled
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    trainer.current_gradient_accumulation_steps = 1  # what Trainer's loop sets for one micro-batch per step
    theirs = trainer.compute_loss(trainer.model, batch)
    prompt_length = batch["prompt_ids"].shape[1]
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)  # (B, P + C)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)  # (B, P + C)
    logits = trainer.model(input_ids=ids, attention_mask=attention).logits[:, prompt_length - 1:-1]  # (B, C, n_vocab)
    logps = token_logprobs(logits, batch["completion_ids"])  # (B, C)
    mask = batch["completion_mask"].bool()  # (B, C)
    old, ref = batch["old_per_token_logps"], batch.get("ref_per_token_logps")
    assert (ref is None) == (beta == 0)
    ours = grpo_loss(logps, old, ref, batch["advantages"], mask, epsilon=0.2, beta=beta, loss_type=loss_type,
                     kl_ratio=kl_ratio)
    assert abs(ours.item() - theirs.item()) < TOL, (ours.item(), theirs.item())
    # the case is not trivial: some ratios left the band and were clipped, ref and old differ where they matter
    ratio, A = torch.exp(logps - old), batch["advantages"][:, None]
    clipped = (torch.clamp(ratio, 0.8, 1.2) * A < ratio * A) & mask
    assert clipped.any() and (~clipped & mask).any()
    if ref is not None:
        assert ((ref - old).abs() * mask).max() > 0.1
