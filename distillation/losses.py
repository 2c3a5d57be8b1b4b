"""Distillation losses as pure functions: student first, then teacher, then masks and options.

Every loss is 0 when the student equals the teacher, averages over real (unpadded) tokens only, and is
tested against an independent numpy computation.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

__all__ = [
    "attention_transfer_loss",
    "feature_map_transfer_loss",
    "masked_mean",
    "mlm_distillation_loss",
    "pretraining_distillation_loss",
]


def masked_mean(values: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``[batch, seq]`` values over the positions where ``attention_mask`` is 1."""
    if attention_mask is None:
        return values.mean()
    weights = attention_mask.to(values.dtype)
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def feature_map_transfer_loss(
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    normalized_decomposition: bool = False,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Feature-map transfer, eq. 2 of the MobileBERT paper: ``1/(TN) Σ_t Σ_n (H^tr - H^st)²``.

    With ``normalized_decomposition`` the discrepancy is split, as §3.5 recommends for stability, into the
    MSE of the per-token normalized feature maps plus the squared differences of the per-token mean and
    variance (the feature-map statistics). Inputs are ``[batch, seq, N]``; the result averages over real
    tokens.
    """
    student_hidden, teacher_hidden = student_hidden.float(), teacher_hidden.float()
    if not normalized_decomposition:
        return masked_mean((student_hidden - teacher_hidden).pow(2).mean(-1), attention_mask)
    student_mean, teacher_mean = student_hidden.mean(-1), teacher_hidden.mean(-1)
    student_var = student_hidden.var(-1, unbiased=False)
    teacher_var = teacher_hidden.var(-1, unbiased=False)
    student_normalized = (student_hidden - student_mean[..., None]) / torch.sqrt(student_var[..., None] + eps)
    teacher_normalized = (teacher_hidden - teacher_mean[..., None]) / torch.sqrt(teacher_var[..., None] + eps)
    per_token = (
        (student_normalized - teacher_normalized).pow(2).mean(-1)
        + (student_mean - teacher_mean).pow(2)
        + (student_var - teacher_var).pow(2)
    )
    return masked_mean(per_token, attention_mask)


def _kl_divergence(target_probs: torch.Tensor, input_log_probs: torch.Tensor) -> torch.Tensor:
    """``Σ_k p_k (log p_k − log q_k)`` over the last dimension, with ``0 · log 0 = 0``."""
    return (torch.xlogy(target_probs, target_probs) - target_probs * input_log_probs).sum(-1)


def attention_transfer_loss(
    student_attentions: torch.Tensor,
    teacher_attentions: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    eps: float = 1e-12,
) -> torch.Tensor:
    """Attention transfer, eq. 3: ``1/(TA) Σ_t Σ_a KL(a^tr_{t,a} ‖ a^st_{t,a})``.

    Inputs are per-head attention distributions ``[batch, heads, seq, seq]`` (rows sum to 1; padded keys
    have probability 0). Averaged over heads and real query positions.
    """
    if student_attentions.shape != teacher_attentions.shape:
        raise ValueError(
            f"Attention maps differ in shape: student {tuple(student_attentions.shape)}, teacher "
            f"{tuple(teacher_attentions.shape)}; attention transfer needs equal head counts and sequences."
        )
    student_log = torch.log(student_attentions.float().clamp(min=eps))
    per_query = _kl_divergence(teacher_attentions.float(), student_log).mean(1)  # [batch, seq]
    return masked_mean(per_query, attention_mask)


def mlm_distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """MLM knowledge distillation (the ``L_KD`` of eq. 4): ``T² · KL(softmax(z^tr/T) ‖ softmax(z^st/T))``
    averaged over the masked positions (``labels != -100``); 0 when nothing is masked."""
    selected = labels != -100
    if not selected.any():
        return student_logits.sum() * 0.0
    student = F.log_softmax(student_logits[selected].float() / temperature, dim=-1)
    teacher = F.softmax(teacher_logits[selected].float() / temperature, dim=-1)
    return _kl_divergence(teacher, student).mean() * temperature**2


def pretraining_distillation_loss(
    mlm_loss: torch.Tensor,
    distillation_loss: torch.Tensor,
    next_sentence_loss: torch.Tensor | None = None,
    alpha: float = 0.5,
) -> torch.Tensor:
    """Pre-training distillation, eq. 4: ``α·L_MLM + (1−α)·L_KD + L_NSP`` (α = 0.5 in the paper)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"`alpha` must be in [0, 1], got {alpha}.")
    loss = alpha * mlm_loss + (1.0 - alpha) * distillation_loss
    return loss if next_sentence_loss is None else loss + next_sentence_loss
