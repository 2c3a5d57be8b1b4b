"""Backends of the MiniLMv2 relation KL (paper 002, eq. 4), chosen by name like transformers' attention functions.

Every backend computes ``Σ_i w_i KL(softmax(T_i) ‖ softmax(S_i))`` over the relation rows ``i`` of
``[rows, seq, d]`` student and teacher relation heads, over real keys only, with its gradient for the student:

- ``"native"``: one compiled C pass per row (``native.py``), CPU float32; built on first use with the system compiler.
- ``"eager"``: PyTorch operations chunk by chunk (``eager.py``); any device, no compiler.
- ``"auto"`` (the default): ``native`` for CPU tensors where it builds, otherwise ``eager``.

``$COMPACT_BERT_RELATION_KERNEL`` sets the default for a process (e.g. ``eager`` to compare); both backends are
tested equal to the autograd formulation of the loss, values and gradients. Both are given inputs checked by one
function first (``validation.py``), so that a wrong shape or dtype is the same error whichever backend runs.
"""

from __future__ import annotations

import logging
import os

import torch

from .eager import eager_relation_kl
from .native import NativeKernelUnavailable, native_relation_kl
from .validation import check_relation_inputs

__all__ = [
    "RELATION_KERNELS",
    "check_relation_kernel_environment",
    "relation_kernel_record",
    "relation_kl",
    "resolve_relation_kernel",
]

logger = logging.getLogger(__name__)

RELATION_KERNELS = ("auto", "native", "eager")
_KERNEL_ENVIRONMENT = "COMPACT_BERT_RELATION_KERNEL"
_warned_unavailable = False


def check_relation_kernel_environment() -> None:
    """``$COMPACT_BERT_RELATION_KERNEL`` names a backend: checked when a relation-distillation command starts, before
    models and data are built, rather than at the first loss."""
    value = os.environ.get(_KERNEL_ENVIRONMENT)
    if value and value not in RELATION_KERNELS:
        raise ValueError(f"${_KERNEL_ENVIRONMENT}={value!r} is not one of {', '.join(RELATION_KERNELS)}.")


def resolve_relation_kernel(name: str | None, device: torch.device) -> str:
    """The backend that ``name`` (or ``$COMPACT_BERT_RELATION_KERNEL``, else ``auto``) selects for ``device``."""
    global _warned_unavailable
    name = name or os.environ.get(_KERNEL_ENVIRONMENT) or "auto"
    if name not in RELATION_KERNELS:
        source = "kernel" if name != os.environ.get(_KERNEL_ENVIRONMENT) else f"${_KERNEL_ENVIRONMENT}"
        raise ValueError(f"Relation {source} {name!r} is not one of {', '.join(RELATION_KERNELS)}.")
    if name == "eager":
        return "eager"
    if device.type != "cpu":
        if name == "native":
            raise ValueError(
                f"The native relation kernel runs on CPU tensors only, got {device.type}; use 'eager' or 'auto'."
            )
        return "eager"
    if name == "auto":
        from .native import load_native_library

        try:
            load_native_library()
        except NativeKernelUnavailable as error:
            if not _warned_unavailable:
                logger.info("Relation loss in PyTorch operations (the native kernel is unavailable: %s).", error)
                _warned_unavailable = True
            return "eager"
    return "native"


def relation_kernel_record(device: torch.device | str) -> dict:
    """Which backend the relation loss of a run on ``device`` uses, and why — for its run summary. Resolved when the
    run starts, before its first loss: the native library is loaded (or found unavailable) once per process, so the
    run keeps this backend to its end, whatever another process does to the cached library meanwhile."""
    device = torch.device(device)
    requested = os.environ.get(_KERNEL_ENVIRONMENT) or "auto"
    kernel = resolve_relation_kernel(None, device)
    if kernel == "native":
        from .native import load_native_library

        reason = f"the compiled C kernel {load_native_library()._name}"
    elif requested == "eager":
        reason = f"${_KERNEL_ENVIRONMENT}=eager"
    elif device.type != "cpu":
        reason = f"tensors on {device.type}: the native kernel runs on CPU tensors only"
    else:
        from .native import load_native_library

        try:
            load_native_library()
            reason = "PyTorch operations"
        except NativeKernelUnavailable as error:
            reason = f"the native kernel is unavailable: {error}"
    return {"kernel": kernel, "requested": requested, "reason": reason}


def relation_kl(
    student_heads: torch.Tensor,
    teacher_heads: torch.Tensor,
    key_mask: torch.Tensor,
    row_weight: torch.Tensor,
    kernel: str | None = None,
) -> torch.Tensor:
    """``Σ_i w_i KL_i`` for ``[rows, seq, d_s]`` student and ``[rows, seq, d_t]`` teacher relation heads, a
    ``[rows, seq]`` key mask (1 real, 0 padding) and ``[rows, seq]`` row weights, by the backend ``kernel`` names.
    The teacher side carries no gradient. Inputs of other shapes, dtypes or devices raise the same ``ValueError``
    whichever backend is named (``validation.check_relation_inputs``)."""
    check_relation_inputs(student_heads, teacher_heads, key_mask, row_weight)
    if resolve_relation_kernel(kernel, student_heads.device) == "native":
        return native_relation_kl(student_heads, teacher_heads, key_mask, row_weight)
    return eager_relation_kl(student_heads, teacher_heads.detach(), key_mask, row_weight)
