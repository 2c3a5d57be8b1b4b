"""The task losses of the heads of every family, as small pure functions (logits first, then labels).

The head classes of ``task_heads`` call them; the pre-training head of the bottleneck architecture
uses ``token_cross_entropy`` too.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

__all__ = [
    "add_balance_loss",
    "classifier_dropout_probability",
    "question_answering_loss",
    "sequence_classification_loss",
    "token_cross_entropy",
]


def classifier_dropout_probability(config) -> float:
    return config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions whose label is not -100 (masked LM, token classification)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config) -> torch.Tensor:
    """Regression (MSE), single-label (cross-entropy) or multi-label (BCE), decided as transformers does."""
    num_labels = logits.shape[-1]
    problem_type = config.problem_type
    if problem_type is None:
        if num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1), labels.squeeze(-1).to(logits.dtype))
    if problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def question_answering_loss(
    start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor, end_positions: torch.Tensor
) -> torch.Tensor:
    """Mean of the start and end cross-entropy; positions outside the sequence (answers truncated away)
    are clamped to an ignored index, as BERT does."""
    ignored = start_logits.shape[1]
    start = start_positions.view(-1).clamp(0, ignored)
    end = end_positions.view(-1).clamp(0, ignored)
    start_loss = F.cross_entropy(start_logits, start, ignore_index=ignored)
    end_loss = F.cross_entropy(end_logits, end, ignore_index=ignored)
    return (start_loss + end_loss) / 2


def add_balance_loss(loss: torch.Tensor | None, aux_loss: torch.Tensor | None) -> torch.Tensor | None:
    """A head's loss includes the backbone's weighted MoE balance loss (paper 002 uses it in fine-tuning)."""
    if loss is None or aux_loss is None:
        return loss
    return loss + aux_loss.to(loss.dtype)
