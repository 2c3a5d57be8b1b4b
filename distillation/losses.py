"""Distillation losses as pure functions: student first, then teacher, then masks and options.

Every loss is 0 when the student equals the teacher, averages over real (unpadded) tokens only, and is
tested against an independent numpy computation.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .relation_kernels import relation_kl

__all__ = [
    "attention_transfer_loss",
    "cosine_relation_loss",
    "feature_map_transfer_loss",
    "hidden_state_relation_loss",
    "masked_mean",
    "mlm_distillation_loss",
    "pretraining_distillation_loss",
    "query_key_relation_loss",
    "sample_token_groups",
    "self_attention_relation_loss",
    "soft_target_loss",
    "token_soft_target_loss",
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


def _relation_heads(states: torch.Tensor, num_relation_heads: int) -> torch.Tensor:
    """``[batch, seq, width]`` states re-split into relation heads: ``[batch · heads, seq, width / heads]``."""
    batch, seq, width = states.shape
    heads = states.float().view(batch, seq, num_relation_heads, width // num_relation_heads).transpose(1, 2)
    return heads.reshape(batch * num_relation_heads, seq, width // num_relation_heads)


def self_attention_relation_loss(
    student_states: dict[str, torch.Tensor],
    teacher_states: dict[str, torch.Tensor],
    num_relation_heads: int = 32,
    attention_mask: torch.Tensor | None = None,
    kernel: str | None = None,
) -> torch.Tensor:
    """MiniLMv2 self-attention relation distillation (paper 002 §3.2).

    For each of ``query``, ``key``, ``value`` (``[batch, seq, all_head_size]`` of one teacher layer and one
    student layer), the heads are concatenated and re-split into ``num_relation_heads`` relation heads —
    each side with its own head size, so hidden sizes and head counts may differ — and the relation
    ``softmax(X_r X_rᵀ / √d_r)`` of the teacher is distilled into the student's with
    ``KL(teacher ‖ student)``, averaged over relation heads and real query tokens; padded tokens are never
    attended to. The loss is the mean over the Q-Q, K-K and V-V relations. The teacher's side carries no
    gradient. ``kernel`` names the backend that computes the KL and its gradient (``relation_kernels``: ``"auto"``,
    ``"native"``, ``"eager"``; default ``$COMPACT_BERT_RELATION_KERNEL`` or ``"auto"``).
    """
    batch, seq = student_states["query"].shape[:2]
    device = student_states["query"].device
    mask = (
        torch.ones(batch, seq, device=device) if attention_mask is None else attention_mask.to(device, torch.float32)
    )
    # d(loss)/d(KL of a relation row): the mean over relation heads, then over real query tokens (``masked_mean``).
    row_weight = (mask / (num_relation_heads * mask.sum().clamp(min=1.0))).repeat_interleave(num_relation_heads, dim=0)
    key_mask = mask.repeat_interleave(num_relation_heads, dim=0)
    losses = []
    for name in ("query", "key", "value"):
        student, teacher = student_states[name], teacher_states[name]
        for side, states in (("student", student), ("teacher", teacher)):
            if states.shape[-1] % num_relation_heads:
                raise ValueError(
                    f"`num_relation_heads` ({num_relation_heads}) must divide the {side}'s {name} size "
                    f"({states.shape[-1]}); choose a common divisor of the teacher's and the student's all-head sizes."
                )
        student_heads = _relation_heads(student, num_relation_heads)
        teacher_heads = _relation_heads(teacher.detach(), num_relation_heads)
        losses.append(relation_kl(student_heads, teacher_heads, key_mask, row_weight, kernel))
    return torch.stack(losses).mean()


def sample_token_groups(
    attention_mask: torch.Tensor, num_tokens: int, group_size: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Draw ``num_tokens`` distinct real tokens of a batch and split them into groups of ``group_size``.

    Returns flat indices into ``[batch * seq]`` shaped ``[num_tokens // group_size, group_size]`` (paper
    003 appendix A: 4096 tokens in 32 groups of 128). Padding is never drawn; a batch with fewer real
    tokens than ``num_tokens`` is an error, since the relations would then silently change meaning.
    """
    if num_tokens % group_size:
        raise ValueError(f"`num_tokens` ({num_tokens}) must be a multiple of `group_size` ({group_size}).")
    real = attention_mask.reshape(-1).nonzero().squeeze(-1)
    if real.numel() < num_tokens:
        raise ValueError(
            f"The batch holds {real.numel()} real tokens but {num_tokens} are sampled for relation distillation; "
            "raise the batch size or block size, or lower the number of sampled tokens."
        )
    chosen = real[torch.randperm(real.numel(), generator=generator, device="cpu")[:num_tokens].to(real.device)]
    return chosen.view(num_tokens // group_size, group_size)


def _cosine_matrix(vectors: torch.Tensor) -> torch.Tensor:
    normalized = F.normalize(vectors.float(), dim=-1)
    return normalized @ normalized.transpose(-1, -2)


def hidden_state_relation_loss(
    student_hidden: torch.Tensor, teacher_hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Hidden states of different widths compared through their relations: per sequence, the cosine similarity of
    every token's state with every other's, matched with MSE between student and teacher (paper 003 eq. 6-8, over
    a sequence's real tokens instead of sampled groups). Inputs are ``[batch, seq, width]``; widths may differ."""
    squared = (_cosine_matrix(student_hidden) - _cosine_matrix(teacher_hidden)).pow(2)
    if attention_mask is None:
        return squared.mean()
    pairs = (attention_mask[:, :, None] * attention_mask[:, None, :]).to(squared.dtype)
    return (squared * pairs).sum() / pairs.sum().clamp(min=1.0)


def cosine_relation_loss(
    student_states: torch.Tensor, teacher_states: torch.Tensor, token_groups: torch.Tensor
) -> torch.Tensor:
    """Relation alignment of paper 003 eq. 6-8: per group of sampled tokens, the pairwise cosine-similarity
    matrices of student and teacher states are matched with MSE (``1/N² Σ_ij (s_ij − s'_ij)²``), averaged
    over groups. Student and teacher widths may differ."""
    student = student_states.reshape(-1, student_states.shape[-1])[token_groups]
    teacher = teacher_states.reshape(-1, teacher_states.shape[-1])[token_groups]
    return (_cosine_matrix(student) - _cosine_matrix(teacher)).pow(2).mean()


def query_key_relation_loss(
    student_query: torch.Tensor,
    student_key: torch.Tensor,
    teacher_query: torch.Tensor,
    teacher_key: torch.Tensor,
    num_heads: int,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention relation alignment of paper 003 eq. 9-11: per head and sequence, the cosine similarity of
    every query with every key, matched with MSE between student and teacher and averaged over heads and
    real (query, key) pairs. Both sides need ``num_heads`` heads; their head sizes may differ."""

    def cosines(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        batch, seq, width = query.shape
        split = (batch, seq, num_heads, width // num_heads)
        query = F.normalize(query.float().view(split).transpose(1, 2), dim=-1)
        key = F.normalize(key.float().view(split).transpose(1, 2), dim=-1)
        return query @ key.transpose(-1, -2)

    squared = (cosines(student_query, student_key) - cosines(teacher_query, teacher_key)).pow(2)
    if attention_mask is None:
        return squared.mean()
    pairs = (attention_mask[:, :, None] * attention_mask[:, None, :]).to(squared.dtype)[:, None]
    return (squared * pairs).sum() / (pairs.sum() * num_heads).clamp(min=1.0)


def soft_target_loss(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Task distillation from a fine-tuned teacher's predictions (Hinton et al., 2015, §2; DistilBERT, TinyBERT's
    prediction layer): ``T² · KL(softmax(z^tr/T) ‖ softmax(z^st/T))`` averaged over the examples of the batch, or,
    for regression (one output), ``(z^st − z^tr)²`` averaged — the MSE to the teacher's prediction. ``T²`` keeps the
    gradient's scale independent of ``T``."""
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"Student logits {tuple(student_logits.shape)} and teacher logits {tuple(teacher_logits.shape)} differ; "
            "task distillation needs the same label set on both sides."
        )
    student_logits, teacher_logits = student_logits.float(), teacher_logits.float()
    if student_logits.shape[-1] == 1:
        return (student_logits - teacher_logits).pow(2).mean()
    student = F.log_softmax(student_logits / temperature, dim=-1)
    teacher = F.softmax(teacher_logits / temperature, dim=-1)
    return _kl_divergence(teacher, student).mean() * temperature**2


def token_soft_target_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """``soft_target_loss`` per token for token classification (``[batch, seq, labels]``), averaged over the real
    (unpadded) tokens only: padding carries no teacher prediction."""
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"Student logits {tuple(student_logits.shape)} and teacher logits {tuple(teacher_logits.shape)} differ; "
            "token distillation needs the same label set and the same tokenization on both sides."
        )
    student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    teacher = F.softmax(teacher_logits.float() / temperature, dim=-1)
    return masked_mean(_kl_divergence(teacher, student), attention_mask) * temperature**2
