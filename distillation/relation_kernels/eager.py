"""The relation KL in PyTorch operations, chunk by chunk: the backend that runs everywhere (any device, no compiler).

Per relation row, ``KL(softmax(T) ‖ softmax(S))`` for the teacher's and the student's relation scores
``T = X_t X_tᵀ/√d_t``, ``S = X_s X_sᵀ/√d_s`` (paper 002, eq. 4) over the real keys. The forward pass walks over
chunks of relation heads small enough to stay in the CPU's cache. The gradient of the KL with respect to ``S`` is
``G = softmax(S) − softmax(T)``, so ``∂/∂X_s = (G + Gᵀ) X_s / √d_s`` (times the upstream gradient): the forward pass
keeps ``G`` when a gradient is wanted and it fits in ``SAVED_GRADIENT_BYTES``, and the backward pass is then two GEMMs
per chunk; for longer sequences it keeps only the heads and recomputes each chunk's two softmaxes instead. The
autograd chain through ``log_softmax``, ``xlogy`` and the products that this replaces made the relation loss cost more
than the student's and the teacher's forward passes together.
"""

from __future__ import annotations

import torch

__all__ = ["eager_relation_kl"]

# Relation rows (query positions of one relation head) per chunk: about 2^19 floats per ``[rows, seq]`` tensor, so
# that the few tensors a chunk needs stay in the CPU's cache.
CHUNK_ELEMENTS = 1 << 19
# The gradient kernel is kept for the backward pass up to this size (a batch of 16 x 128 with 32 relation heads:
# 33.5 MB per relation), and recomputed chunk by chunk beyond.
SAVED_GRADIENT_BYTES = 256_000_000


def _log_relation(heads: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
    """``log_softmax(X_r X_rᵀ / √d_r + key_bias)``: padded keys (bias: most negative float) get probability 0."""
    scores = torch.baddbmm(key_bias, heads, heads.transpose(1, 2), alpha=heads.shape[-1] ** -0.5)
    return torch.log_softmax(scores, dim=-1)


class _ChunkedRelationKL(torch.autograd.Function):
    """Per-row divergences ``[rows, seq]`` of ``[rows, seq, d]`` student and teacher relation heads."""

    @staticmethod
    def forward(ctx, student_heads, teacher_heads, key_bias):
        rows, seq = student_heads.shape[:2]
        chunk = max(1, CHUNK_ELEMENTS // (seq**2))
        kernel_bytes = rows * seq * seq * student_heads.element_size()
        keep_gradient = ctx.needs_input_grad[0] and kernel_bytes <= SAVED_GRADIENT_BYTES
        gradient = student_heads.new_empty(rows, seq, seq) if keep_gradient else None
        divergence = student_heads.new_empty(rows, seq)
        for start in range(0, rows, chunk):
            part = slice(start, start + chunk)
            teacher_log = _log_relation(teacher_heads[part], key_bias[part])
            student_log = _log_relation(student_heads[part], key_bias[part])
            teacher_probs = teacher_log.exp()
            if keep_gradient:
                torch.sub(student_log.exp(), teacher_probs, out=gradient[part])
            torch.sum(teacher_probs.mul_(teacher_log.sub_(student_log)), dim=-1, out=divergence[part])
        if keep_gradient:
            ctx.save_for_backward(student_heads, gradient)
        else:
            ctx.save_for_backward(student_heads, teacher_heads, key_bias)
        ctx.keep_gradient = keep_gradient
        return divergence

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.keep_gradient:
            student_heads, gradient = ctx.saved_tensors
        else:
            student_heads, teacher_heads, key_bias = ctx.saved_tensors
        rows, seq = student_heads.shape[:2]
        chunk = max(1, CHUNK_ELEMENTS // (seq**2))
        grad = torch.empty_like(student_heads)
        scale = student_heads.shape[-1] ** -0.5
        for start in range(0, rows, chunk):
            part = slice(start, start + chunk)
            if ctx.keep_gradient:
                difference = gradient[part]
            else:
                teacher_probs = _log_relation(teacher_heads[part], key_bias[part]).exp_()
                difference = _log_relation(student_heads[part], key_bias[part]).exp_().sub_(teacher_probs)
            difference = difference * (grad_output[part].unsqueeze(-1) * scale)
            heads = student_heads[part]
            grad[part] = torch.baddbmm(torch.bmm(difference, heads), difference.transpose(1, 2), heads)
        return grad, None, None


def eager_relation_kl(
    student_heads: torch.Tensor, teacher_heads: torch.Tensor, key_mask: torch.Tensor, row_weight: torch.Tensor
) -> torch.Tensor:
    """``Σ_i w_i KL_i`` over every relation row ``i`` (see ``relation_kernels.relation_kl``)."""
    key_bias = torch.zeros_like(key_mask, dtype=torch.float32).unsqueeze(1)
    key_bias.masked_fill_(~key_mask.bool().unsqueeze(1), torch.finfo(torch.float32).min)
    divergence = _ChunkedRelationKL.apply(student_heads, teacher_heads, key_bias)
    return (divergence * row_weight).sum()
