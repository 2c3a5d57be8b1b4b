"""Every expert's GEMM in one grouped-GEMM call (``torch._grouped_mm``), for the MoE layer in training and on CUDA.

Why: the MoE layer multiplies each expert's tokens separately, one small GEMM per expert and matrix, forward and
backward; with many experts the calls and their small, under-filled products dominate. ``torch._grouped_mm``
multiplies the rows of every expert, sorted by expert into one ``[tokens, in]`` tensor, with each expert's own
``[in, out]`` matrix in one call. Measured on this project's 2-core CPU (``benchmarks/bench_moe_layer.py``, training
forward + backward): 0.64-0.74x the per-expert loop's time for 64 experts of d=768, 0.93-0.98x for 4 experts of
d=384; at inference on CPU the experts multiply with weights packed once for oneDNN instead (``packed_weights``).

When it can run: wherever the op exists and passed a one-time check against the per-expert loop for that device
and dtype (``grouped_gemm_supported``); never while tracing, compiling or exporting (the traced programs keep their
per-expert form), nor for expert widths whose rows are not a multiple of 16 bytes (the op's alignment rule). When it
does run is the MoE implementation's choice (``moe_implementations``: ``"grouped_mm"``, or ``"auto"`` in training
and on CUDA). torch 2.13's CPU backward of the op rejects an expanded (stride-0) output gradient, such as
``.sum().backward()`` hands it: the output passes through ``_contiguous_gradient`` first.
"""

from __future__ import annotations

import functools

import torch

__all__ = ["grouped_gemm_supported", "grouped_linear_rows"]


def grouped_gemm_supported(weight: torch.Tensor) -> bool:
    """Whether the experts of ``weight`` (``[E, out, in]``) can run as one grouped GEMM now (module docstring)."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    if torch.compiler.is_compiling() or torch.compiler.is_exporting() or torch.jit.is_tracing():
        return False
    if any(size * weight.element_size() % 16 for size in weight.shape[-2:]):
        return False  # the op needs 16-byte-aligned rows (e.g. widths divisible by 4 in float32)
    return weight.device.type in ("cuda", "cpu") and _probe(weight.device, weight.dtype)


@functools.cache
def _probe(device: torch.device, dtype: torch.dtype) -> bool:
    """One small grouped product against the per-expert loop (an unsupported dtype or GPU raises or differs)."""
    try:
        generator = torch.Generator().manual_seed(0)
        rows = torch.randn(48, 32, generator=generator).to(device, dtype)
        weight = torch.randn(3, 16, 32, generator=generator).to(device, dtype)
        counts = [16, 0, 32]
        grouped = _grouped(rows, weight, _offsets(counts, device))
        expected = torch.cat([part @ matrix.T for part, matrix in zip(rows.split(counts), weight)])
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    return bool(torch.allclose(grouped.float(), expected.float(), rtol=tolerance, atol=tolerance))


def _offsets(counts: list[int], device: torch.device) -> torch.Tensor:
    """``torch._grouped_mm``'s ``offs``: where each expert's rows end, as int32."""
    return torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32).to(device)


class _ContiguousGradient(torch.autograd.Function):
    """Identity whose backward makes the incoming gradient contiguous (see the module docstring)."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, gradient: torch.Tensor) -> torch.Tensor:
        return gradient.contiguous()


def _grouped(rows: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    products = torch._grouped_mm(rows, weight.transpose(-2, -1), offs=offsets)
    return _ContiguousGradient.apply(products) if products.requires_grad else products


def grouped_linear_rows(
    rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, counts: list[int], row_experts: torch.Tensor
) -> torch.Tensor:
    """``rows`` sorted by expert (``counts`` rows each) times each expert's ``[out, in]`` matrix, plus its bias:
    ``F.linear(rows_e, weight[e], bias[e])`` for every expert ``e``, in one call."""
    products = _grouped(rows, weight, _offsets(counts, rows.device))
    return products + bias.index_select(0, row_experts)
