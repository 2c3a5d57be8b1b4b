"""Dense linear layers at inference: packed weights, the epilogue fused into the GEMM, and projections of one
input multiplied as one GEMM.

Why: each ``nn.Linear`` call re-packs its weight for the GEMM kernel and copies its bias into the output, and the
activation and residual add that follow are passes over memory of their own. At inference these helpers multiply
with weights packed once (``packed_weights``), apply bias, ReLU / exact GELU and the residual add in oneDNN's GEMM
epilogue, and multiply projections that read the same tensor (MobileBERT's two input bottlenecks; query, key and
value where they share an input) as one GEMM over the joined weights. From 2^25 multiply-adds per call this takes
0.65-0.97x the modules' time (``benchmarks/bench_fused_linear.py``; whole models: IB-BERT-large and BERT-base
0.75-0.78x, MiniLM 384H 0.78-0.84x, ``benchmarks/bench_preset_latency.py``); below that size the per-call checks
cost what the fusion saves, so MobileBERT at batch 1 keeps its plain modules. Outputs equal the modules' own to
float32 rounding (the same products, summed in another order at most; tested at 1e-5).

They call the modules as usual (and apply dropout, activation and residual separately) whenever the product has
fewer than ``MIN_FUSED_MULTIPLY_ADDS`` multiply-adds (where the checks cost more than the fusion saves), or:
- ``packed_weights`` says the plain path must run: training mode, gradients recorded, compiling, tracing or
  exporting, not float32 or not on CPU, CPU autocast, packing switched off (config field
  ``pack_inference_weights=False``, ``weight_packing(False)``, oneDNN disabled) or unavailable;
- a linear map is not a plain ``nn.Linear`` (PEFT's LoRA wrapper, a quantized layer), or a module whose call
  would be skipped has forward hooks or a replaced ``forward`` (distillation's ``SubmoduleRecorder`` reads
  query / key / value through hooks; Accelerate's device hooks replace ``forward``), or global module hooks
  exist: every hook sees its call.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.modules import module as torch_module
from transformers.activations import GELUActivation

from .packed_weights import PackedLinearGroup, packed_linear, packed_linear_add, packed_linear_group

__all__ = ["MIN_FUSED_MULTIPLY_ADDS", "fused_linear", "joined_linear", "joined_linear_at_inference"]

# Below this many multiply-adds per call the fused path's few microseconds of checks cost as much as it saves or
# more (``benchmarks/bench_fused_linear.py`` on the 2-core AMD EPYC: 1.01-1.31x the plain modules' time at 4.2-8.4M,
# MobileBERT's batch-1 products; 1.00x at 16.8M; 0.65-0.97x from 33.6M up).
MIN_FUSED_MULTIPLY_ADDS = 1 << 25

# torch's tables of global module hooks (dicts it mutates in place; a torch without one has nothing to check there).
_GLOBAL_HOOK_TABLES = tuple(
    getattr(torch_module, name)
    for name in ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_forward_hooks_always_called")
    if hasattr(torch_module, name)
)


def _fused_activation(activation: nn.Module | None) -> str | None:
    """oneDNN's epilogue name for ``activation`` where it computes the same function, else ``None``."""
    if isinstance(activation, nn.ReLU):
        return "relu"
    if isinstance(activation, GELUActivation) and activation.act is nn.functional.gelu:
        return "gelu"
    return None


def _called_as_usual(module: nn.Module) -> bool:
    """Whether skipping ``module``'s ``__call__`` would skip something a user or library attached to it."""
    return bool(module._forward_hooks or module._forward_pre_hooks or "forward" in module.__dict__)


def _packed_group(
    linears: tuple[nn.Module, ...], inputs: torch.Tensor, bypassed: Sequence[nn.Module], enabled: bool
) -> PackedLinearGroup | None:
    """The packed group for ``linears`` if the fused path may replace their calls (and ``bypassed``'s) now and the
    product is large enough to pay for it. Runs for every dense layer of a forward pass: cheapest checks first."""
    if not enabled or any(_GLOBAL_HOOK_TABLES):
        return None
    if any(type(linear) is not nn.Linear for linear in linears):
        return None
    if inputs.numel() * sum(linear.out_features for linear in linears) < MIN_FUSED_MULTIPLY_ADDS:
        return None
    if any(_called_as_usual(module) for module in (*linears, *bypassed)):
        return None
    return packed_linear_group(linears, enabled)


def fused_linear(
    linear: nn.Module,
    inputs: torch.Tensor,
    *,
    activation: nn.Module | None = None,
    dropout: nn.Module | None = None,
    residual: torch.Tensor | None = None,
    enabled: bool = True,
    bypassed: Sequence[nn.Module] = (),
) -> torch.Tensor:
    """``dropout(activation(linear(inputs))) + residual`` (each part optional), as one packed GEMM at inference.

    ``bypassed``: modules whose own ``forward`` the caller skips by calling this (their hooks are checked too).
    """
    fused_name = None if activation is None else _fused_activation(activation)
    group = None
    if (activation is None or fused_name is not None) and (dropout is None or not dropout.training):
        group = _packed_group((linear,), inputs, bypassed, enabled)
    if group is None:
        outputs = linear(inputs)
        if activation is not None:
            outputs = activation(outputs)
        if dropout is not None:
            outputs = dropout(outputs)
        return outputs if residual is None else outputs + residual
    rows = inputs.reshape(-1, inputs.shape[-1])
    if residual is not None and fused_name is None:
        others = residual.reshape(rows.shape[0], -1).contiguous()
        outputs = packed_linear_add(rows, others, group.matrix, group.bias)
    else:
        outputs = packed_linear(rows, group.matrix, group.bias, fused_name)
        if residual is not None:  # the activation comes before the addition: not one epilogue
            outputs = outputs + residual.reshape(rows.shape[0], -1)
    return outputs.view(*inputs.shape[:-1], outputs.shape[-1])


def joined_linear(
    linears: Sequence[nn.Module], inputs: torch.Tensor, *, enabled: bool = True
) -> tuple[torch.Tensor, ...]:
    """``tuple(linear(inputs) for linear in linears)``, as one packed GEMM over the joined weights at inference
    (each output a view of the joined result)."""
    joined = joined_linear_at_inference(linears, inputs, enabled=enabled)
    return tuple(linear(inputs) for linear in linears) if joined is None else joined


def joined_linear_at_inference(
    linears: Sequence[nn.Module], inputs: torch.Tensor, *, enabled: bool = True, bypassed: Sequence[nn.Module] = ()
) -> tuple[torch.Tensor, ...] | None:
    """``joined_linear``'s one packed GEMM, or ``None`` where the caller must call its modules as usual (for a
    caller that skips more than the linear maps: ``bypassed``, whose hooks are checked too)."""
    group = _packed_group(tuple(linears), inputs, bypassed, enabled)
    if group is None:
        return None
    joined = packed_linear(inputs.reshape(-1, inputs.shape[-1]), group.matrix, group.bias)
    return tuple(part.view(*inputs.shape[:-1], part.shape[-1]) for part in joined.split(group.widths, dim=-1))
