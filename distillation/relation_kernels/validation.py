"""The one check of the relation KL's inputs, run before any backend sees them.

The backends fail differently on inputs they do not expect: ``eager`` with a broadcasting error from deep inside
``baddbmm``, ``native`` not at all — it reads past the end of a shorter tensor and returns ``nan`` or garbage, since a
C loop trusts the sizes it is given. Checking shapes, dtypes and devices here, in Python, before dispatch (and again at
the native entry point, which may be called directly) gives every backend the same error, one that names the argument.
"""

from __future__ import annotations

import torch

__all__ = ["check_relation_inputs"]


def _describe(name: str, tensor: torch.Tensor) -> str:
    return f"{name} {list(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')} on {tensor.device}"


def _check_is_tensor(**tensors) -> None:
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}.")


def _check_heads(student_heads: torch.Tensor, teacher_heads: torch.Tensor) -> None:
    student = _describe("student_heads", student_heads)
    if student_heads.dim() != 3 or 0 in student_heads.shape[1:]:
        raise ValueError(f"student_heads must be [rows, seq ≥ 1, d_s ≥ 1]; got {student}.")
    rows, seq = student_heads.shape[:2]
    teacher = _describe("teacher_heads", teacher_heads)
    if teacher_heads.dim() != 3 or teacher_heads.shape[:2] != (rows, seq) or teacher_heads.shape[2] == 0:
        raise ValueError(
            f"teacher_heads must be [rows, seq, d_t] with the student's rows and sequence length, "
            f"[{rows}, {seq}, d_t ≥ 1]; got {teacher} for {student}."
        )
    for name, tensor, description in (
        ("student_heads", student_heads, student),
        ("teacher_heads", teacher_heads, teacher),
    ):
        if tensor.dtype != torch.float32:
            raise ValueError(f"{name} must be float32 (every backend computes in float32); got {description}.")


def _check_row_tensors(student_heads: torch.Tensor, key_mask: torch.Tensor, row_weight: torch.Tensor) -> None:
    rows, seq = student_heads.shape[:2]
    for name, tensor in (("key_mask", key_mask), ("row_weight", row_weight)):
        if tensor.shape != (rows, seq):
            raise ValueError(
                f"{name} must be [rows, seq] = [{rows}, {seq}], one value per relation row and position of "
                f"{_describe('student_heads', student_heads)}; got {_describe(name, tensor)}."
            )
    if key_mask.is_complex():
        raise ValueError(
            f"key_mask must be bool, integer or real (nonzero: a real key); got {_describe('key_mask', key_mask)}."
        )
    if row_weight.dtype != torch.float32:
        raise ValueError(f"row_weight must be float32; got {_describe('row_weight', row_weight)}.")


def _check_one_device(**tensors) -> None:
    (first_name, first), *others = tensors.items()
    for name, tensor in others:
        if tensor.device != first.device:
            raise ValueError(
                f"the relation KL's inputs must be on one device; got {_describe(first_name, first)} and "
                f"{_describe(name, tensor)}."
            )


def check_relation_inputs(
    student_heads: torch.Tensor, teacher_heads: torch.Tensor, key_mask: torch.Tensor, row_weight: torch.Tensor
) -> None:
    """Raise ``ValueError`` (``TypeError`` for a non-tensor) naming the first argument that is not what
    ``relation_kl`` takes: ``[rows, seq, d_s]`` and ``[rows, seq, d_t]`` float32 heads, a ``[rows, seq]`` key mask
    (bool, integer or real) and ``[rows, seq]`` float32 row weights, all on one device. Reads only metadata, never
    the values: a check per loss call, not a pass over the data."""
    _check_is_tensor(
        student_heads=student_heads, teacher_heads=teacher_heads, key_mask=key_mask, row_weight=row_weight
    )
    _check_heads(student_heads, teacher_heads)
    _check_row_tensors(student_heads, key_mask, row_weight)
    _check_one_device(
        student_heads=student_heads, teacher_heads=teacher_heads, key_mask=key_mask, row_weight=row_weight
    )
