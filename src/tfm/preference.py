"""From a language model to an assistant: the losses that tune a pretrained model on preferences and on rewards.

A response y to a prompt x is scored by the model as a sum over its tokens, log π(y|x) = Σ_t log π(y_t | x, y_<t)
(:func:`sequence_logprobs`). Two ways to train on that score:

- DPO (Rafailov et al., 2023) learns from pairs, a chosen and a rejected response to one prompt, with no reward model
  and no sampling: a classification loss on log-probability ratios against a frozen reference (:func:`dpo_loss`).
- GRPO (Shao et al., 2024) samples a group of answers per prompt, scores each with a reward, and uses the reward
  relative to the group as the advantage (:func:`group_advantages`) in PPO's clipped objective with a KL penalty to
  the reference (:func:`grpo_loss`): no value network, the group is the baseline.

The defaults are TRL 1.16's (``DPOTrainer``, ``GRPOTrainer``) but for GRPO's β, the paper's 0.04 (TRL's is 0: no
reference model); the tests check these functions against TRL's trainers on the same batches.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

GRPO_LOSS_TYPES = ("dapo", "grpo")
"""How :func:`grpo_loss` averages its per-token losses: ``"dapo"`` (TRL 1.16's default) over every response token of
the batch, ``"grpo"`` (the GRPO paper's) over each response's tokens, then over the responses."""


def _check_mask(mask: Tensor, shape: torch.Size) -> None:
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = a response token), got {mask.dtype}: pass mask.bool()")
    if mask.shape != shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)} but the tokens have shape (B, T) = {tuple(shape)}")


def _check_logits(logits: Tensor, targets: Tensor) -> None:
    if logits.dim() != 3:
        raise ValueError(f"logits must have shape (B, T, n_vocab), got {tuple(logits.shape)}")
    if targets.shape != logits.shape[:2]:
        raise ValueError(f"targets {tuple(targets.shape)} must be logits {tuple(logits.shape)} without the "
                         "vocabulary dimension: (B, T)")


def token_logprobs(logits: Tensor, targets: Tensor) -> Tensor:
    """log p(targets[b, t]) under softmax(logits[b, t]): ``logits (B, T, n_vocab)``, ``targets (B, T)`` -> ``(B, T)``.

    Position t's logits score position t's target. A causal language model's logits at t predict the *next* token, so
    for ids ``(B, T)`` pass ``logits[:, :-1]`` and ``ids[:, 1:]``. Computed in float32 whatever the logits' dtype.
    """
    _check_logits(logits, targets)
    n_vocab = logits.shape[-1]
    if targets.numel() and (targets.min() < 0 or targets.max() >= n_vocab):
        raise ValueError(f"targets must be token ids in [0, {n_vocab}), got values in [{targets.min().item()}, "
                         f"{targets.max().item()}]: give padding (-100) any id and leave it out with a mask")
    log_probs = F.log_softmax(logits.float(), dim=-1)  # (B, T, n_vocab)
    return log_probs.gather(-1, targets[..., None]).squeeze(-1)  # (B, T)


def sequence_logprobs(logits: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """log π(y|x) per sequence: Σ_t log p(targets[b, t]) over the positions where ``mask`` is True -> ``(B,)``.

    ``mask (B, T)`` is boolean, True on the response tokens: the prompt and the padding do not count. The sum, not the
    mean, as in DPO and TRL (a mean would make a long response as likely as a short one of the same per-token quality).
    Targets under False may be anything in the vocabulary (e.g. the pad id).
    """
    _check_logits(logits, targets)
    _check_mask(mask, targets.shape)
    per_token = token_logprobs(logits, targets.masked_fill(~mask, 0))  # (B, T)
    return per_token.masked_fill(~mask, 0.0).sum(-1)  # (B,)


def dpo_loss(policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float = 0.1) -> tuple[Tensor, Tensor, Tensor]:
    """The DPO loss from sequence log-probabilities ``(B,)`` -> ``(mean loss, chosen rewards, rejected rewards)``.

    Three lines from the objective RLHF maximises, a reward r minus β times the KL divergence from the reference:

    1. max_π E_{y~π}[r(x, y)] − β KL(π ‖ π_ref) is solved by π*(y|x) = π_ref(y|x) exp(r(x, y) / β) / Z(x).
    2. Solved for the reward: r(x, y) = β log(π*(y|x) / π_ref(y|x)) + β log Z(x), the *implicit reward*.
    3. Put it into the Bradley–Terry model p(y_w ≻ y_l) = σ(r_w − r_l): Z(x) cancels, and the negative
       log-likelihood of the preferences is  −log σ(β [(log π(y_w) − log π_ref(y_w)) − (log π(y_l) − log π_ref(y_l))]).

    The rewards returned are β (log π − log π_ref) of each response (detached: they are for watching, as TRL logs
    them). At π = π_ref the loss is ln 2 whatever the data; it falls as the chosen response gains probability
    relative to the rejected one. β (TRL's and the paper's default 0.1) sets how far from the reference the
    optimum lies: a small β lets the policy move far. TRL 1.16's defaults match this: ``loss_type="sigmoid"``,
    ``label_smoothing=0``, log-probabilities summed over the response tokens.
    """
    if not beta > 0:
        raise ValueError(f"beta must be > 0 (the KL penalty's weight), got {beta}")
    shape = policy_chosen.shape
    if policy_chosen.dim() != 1:
        raise ValueError(f"log-probabilities must have shape (B,), one per sequence, got {tuple(shape)}")
    for name, t in (("policy_rejected", policy_rejected), ("ref_chosen", ref_chosen), ("ref_rejected", ref_rejected)):
        if t.shape != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but policy_chosen has {tuple(shape)}")
    chosen_logratio = policy_chosen - ref_chosen  # (B,)
    rejected_logratio = policy_rejected - ref_rejected  # (B,)
    losses = -F.logsigmoid(beta * (chosen_logratio - rejected_logratio))  # (B,)
    return losses.mean(), beta * chosen_logratio.detach(), beta * rejected_logratio.detach()


def group_advantages(rewards: Tensor, group_size: int, scale: bool = True, eps: float = 1e-4) -> Tensor:
    """Each answer's reward relative to its group: (r − mean of its group) / (std of its group + eps) -> ``(N,)``.

    ``rewards (N,)`` holds ``N / group_size`` groups of ``group_size`` answers to one prompt each, one group after
    the other (TRL's order). The group's mean is the baseline that PPO's value network would otherwise estimate: an
    answer better than its siblings gets a positive advantage, a group whose answers all score the same gets zero
    (it teaches nothing). The std is the sample standard deviation (Bessel's correction, divided by
    ``group_size − 1``) and eps = 1e-4, as in TRL 1.16 (``scale_rewards="group"``). ``scale=False`` skips the
    division (Liu et al., 2025, "Dr. GRPO": scaling weights easy and hard prompts differently).
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"group_size must be an int >= 2 (a group of one answer has no baseline), got {group_size!r}")
    if rewards.dim() != 1:
        raise ValueError(f"rewards must have shape (N,), one per answer, got {tuple(rewards.shape)}")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of group_size={group_size}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    grouped = rewards.view(-1, group_size)  # (N / G, G)
    advantages = grouped - grouped.mean(-1, keepdim=True)  # (N / G, G)
    if scale:
        advantages = advantages / (grouped.std(-1, correction=1, keepdim=True) + eps)
    return advantages.flatten()  # (N,)


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor | None, advantages: Tensor, mask: Tensor,
              epsilon: float = 0.2, beta: float = 0.04, loss_type: str = "dapo", kl_ratio: bool = True) -> Tensor:
    """The GRPO loss from per-token log-probabilities ``(B, T)`` of B sampled responses: a scalar to minimise.

    For every response token t (``mask`` True), with A the response's advantage (``advantages (B,)``):

    - ratio r_t = exp(log π(y_t) − log π_old(y_t)), π_old the policy that sampled the responses (``old_logps``,
      without gradient). On the first update after sampling π = π_old and r_t = 1: the value is then −A plus the
      penalty, but the gradient is still A ∇log π.
    - PPO's clipped surrogate s_t = min(r_t A, clip(r_t, 1 − ε, 1 + ε) A): once r_t has left [1 − ε, 1 + ε] in the
      direction A rewards, the gradient stops, so one batch cannot move the policy far.
    - the KL penalty with the k3 estimator, k_t = exp(q_t) − q_t − 1 with q_t = log π_ref(y_t) − log π(y_t): never
      negative, and its mean over tokens sampled from π is KL(π ‖ π_ref) without bias (Schulman, 2020). But the
      tokens were sampled from π_old: ``kl_ratio=True`` (TRL 1.16's default, ``use_bias_correction_kl``, from
      DeepSeek-V3.2) weighs k_t by r_t, the importance weight that turns a mean under π_old into one under π;
      ``kl_ratio=False`` is the GRPO paper's loss.

    The per-token loss ℓ_t = −s_t + β r_t k_t (β k_t without ``kl_ratio``) is then averaged by ``loss_type``:
    ``"dapo"`` (TRL 1.16's default) is Σ_{b,t} ℓ_t / (number of response tokens in the batch), every token weighing
    the same; ``"grpo"`` (the paper's) averages each response over its own tokens, then over the responses, so that a
    token of a long response weighs less (the length bias that Yu et al., 2025, "DAPO", removed). TRL's "dapo"
    divides by the tokens of the whole generation batch, over processes and accumulated micro-batches: for one batch
    on one process, this batch's count. β = 0.04 is the paper's value; TRL 1.16's default is β = 0, which needs no
    reference model (``ref_logps`` may then be None).
    """
    if loss_type not in GRPO_LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {GRPO_LOSS_TYPES}, got {loss_type!r}")
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon must lie in (0, 1) (the ratio is clipped to [1 - epsilon, 1 + epsilon]), "
                         f"got {epsilon}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0 (the KL penalty's weight; 0 turns it off), got {beta}")
    if logps.dim() != 2:
        raise ValueError(f"logps must have shape (B, T), one log-probability per token, got {tuple(logps.shape)}")
    if old_logps.shape != logps.shape:
        raise ValueError(f"old_logps has shape {tuple(old_logps.shape)} but logps has {tuple(logps.shape)}")
    if beta > 0 and ref_logps is None:
        raise ValueError(f"beta={beta} > 0 needs ref_logps, the reference model's log-probabilities")
    if ref_logps is not None and ref_logps.shape != logps.shape:
        raise ValueError(f"ref_logps has shape {tuple(ref_logps.shape)} but logps has {tuple(logps.shape)}")
    if advantages.shape != logps.shape[:1]:
        raise ValueError(f"advantages must have shape (B,) = ({logps.shape[0]},), one per response, got "
                         f"{tuple(advantages.shape)}")
    _check_mask(mask, logps.shape)
    A = advantages[:, None]  # (B, 1): every token of a response shares its advantage
    ratio = torch.exp(logps - old_logps.detach())  # (B, T)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)  # (B, T)
    per_token = -torch.min(ratio * A, clipped * A)  # (B, T)
    if beta > 0:
        q = ref_logps.detach() - logps  # (B, T)
        kl = torch.exp(q) - q - 1  # (B, T): k3, >= 0
        per_token = per_token + beta * (ratio * kl if kl_ratio else kl)
    # where, not a product: a padded position's value may be inf, and inf · 0 is nan
    per_token = torch.where(mask, per_token, 0.0)  # (B, T)
    if loss_type == "dapo":
        return per_token.sum() / mask.sum().clamp(min=1)
    per_response = per_token.sum(-1) / mask.sum(-1).clamp(min=1)  # (B,)
    return per_response.mean()
