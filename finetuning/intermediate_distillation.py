"""Intermediate-layer distillation in the task stage: the student's hidden states follow the fine-tuned teacher's.

TinyBERT's task-specific distillation (Jiao et al., 2020, §3.1 eq. 8 and §3.2) does not stop at the predictions: each
student layer ``m`` learns the hidden states of teacher layer ``g(m)``, and the student's embeddings the teacher's
(``g(0) = 0``). A fine-tuned teacher's hidden states say how it reads each token of *this* task — which word of a
pair matches which, where an entity starts — far more than its one prediction per example does. The loss is

    L_hidden = 1/(M+1) · Σ_{m=0..M} MSE(H^S_m, H^T_{g(m)})    (TinyBERT eq. 8, MobileBERT eq. 2)

averaged over real tokens. TinyBERT's projection ``W_h`` is left out when the widths are equal: a student that
starts from its teacher's layers (``distillation/teacher_init.py``) already speaks the teacher's basis. Where the
widths differ, the states are compared through their relations — the cosine similarity of every token with every
other, matched with MSE (paper 003 eq. 6-8) — which needs no projection to train and save.

TinyBERT also teaches each student layer the teacher layer's attention (eq. 7). Here it is the KL divergence of the
attention distributions, head by head (``distillation/losses.attention_transfer_loss``, MobileBERT eq. 3), weighted
by its own ``γ``: it needs equal head counts on both sides, and both models run eager attention to return them.

``g`` is the layer map the student was initialized with (``config.teacher_initialization``), so each student layer
keeps learning the teacher layer it is a copy of; a student that did not start from a teacher of this depth gets
TinyBERT's uniform map, ``g(m) = m · N / M``.
"""

from __future__ import annotations

import torch

from ..distillation.losses import attention_transfer_loss, feature_map_transfer_loss, hidden_state_relation_loss

__all__ = [
    "attention_distillation_loss",
    "check_attention_heads",
    "intermediate_distillation_loss",
    "task_layer_map",
]


def task_layer_map(student_config, teacher_layers: int) -> list[int]:
    """The 1-based teacher layer of each student layer (0 is the embeddings): the student's recorded
    initialization map when it fits ``teacher_layers``, else the uniform map ``m · N / M``."""
    student_layers = student_config.num_hidden_layers
    recorded = (getattr(student_config, "teacher_initialization", None) or {}).get("layer_map")
    if (
        isinstance(recorded, list)
        and len(recorded) == student_layers
        and all(isinstance(layer, int) and 0 <= layer < teacher_layers for layer in recorded)
    ):
        return [layer + 1 for layer in recorded]
    return [round(layer * teacher_layers / student_layers) for layer in range(1, student_layers + 1)]


def intermediate_distillation_loss(
    student_states: tuple[torch.Tensor, ...],
    teacher_states: tuple[torch.Tensor, ...],
    layer_map: list[int],
    attention_mask: torch.Tensor | None,
) -> torch.Tensor:
    """``L_hidden`` of the module docstring: ``student_states`` and ``teacher_states`` are the models'
    ``hidden_states`` (embeddings first), ``layer_map`` the 1-based teacher layer of each student layer."""
    if len(student_states) != len(layer_map) + 1:
        raise ValueError(
            f"The student returned {len(student_states)} hidden states for {len(layer_map)} layers; "
            "intermediate-layer distillation needs the embeddings and one state per layer."
        )
    pairs = [(0, 0), *((index + 1, layer) for index, layer in enumerate(layer_map))]
    losses = []
    for student_index, teacher_index in pairs:
        student, teacher = student_states[student_index], teacher_states[teacher_index].detach()
        if student.shape[-1] == teacher.shape[-1]:
            losses.append(feature_map_transfer_loss(student, teacher, attention_mask))
        else:
            losses.append(hidden_state_relation_loss(student, teacher, attention_mask))
    return torch.stack(losses).mean()


def check_attention_heads(student_config, teacher_config) -> None:
    """The attention loss compares head by head: ``ValueError`` naming both head counts when they differ."""
    student, teacher = student_config.num_attention_heads, teacher_config.num_attention_heads
    if student != teacher:
        raise ValueError(
            f"the attention loss (distillation_attention_weight > 0) compares head by head, and the student has "
            f"{student} heads, the teacher {teacher}. Use 0 (the hidden-state loss works across shapes) or a student "
            f"with {teacher} heads."
        )


def attention_distillation_loss(
    student_attentions: tuple[torch.Tensor, ...],
    teacher_attentions: tuple[torch.Tensor, ...],
    layer_map: list[int],
    attention_mask: torch.Tensor | None,
) -> torch.Tensor:
    """``L_attn = 1/M · Σ_m KL(A^T_{g(m)} ‖ A^S_m)`` (TinyBERT eq. 7 as a KL of distributions): ``*_attentions`` are
    the models' per-layer ``[batch, heads, seq, seq]`` attention probabilities, ``layer_map`` the 1-based teacher
    layer of each student layer."""
    if len(student_attentions) != len(layer_map):
        raise ValueError(
            f"The student returned {len(student_attentions)} attention maps for {len(layer_map)} layers; "
            "attention distillation needs one map per layer."
        )
    losses = [
        attention_transfer_loss(student, teacher_attentions[layer - 1].detach(), attention_mask)
        for student, layer in zip(student_attentions, layer_map)
    ]
    return torch.stack(losses).mean()
