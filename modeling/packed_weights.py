"""Linear weights packed once for the CPU's GEMM library, for inference (eval mode, no gradients).

Why: ``F.linear`` on CPU re-lays-out ("packs") its weight matrix into the GEMM kernel's blocked format on
every call. For one large matrix that cost is small next to the multiplication; for a mixture of experts,
where each expert multiplies only its own few tokens, it dominates (issue 2 measured the 4-expert layer at
2.2× one expert FFN for that reason). oneDNN can pack a weight once (``mkldnn._reorder_linear_weight``)
and multiply with the packed copy (``mkldnn._linear_pointwise``, which also fuses the exact GELU and ReLU
into the GEMM); this module keeps such packed copies and hands them to the MoE layer.

When a packed copy is used, all at once:
- the module is in eval mode and autograd records nothing (``torch.no_grad`` / ``torch.inference_mode``):
  training and ``model.train()`` numerics never go through it;
- nothing is being traced, compiled or exported (inductor's freezing packs weights its own way);
- the weight is a float32 CPU ``nn.Parameter`` (not a tensor computed on the fly, as PEFT's unmerged LoRA
  on ``target_parameters`` gives), and packing was not switched off (config field
  ``pack_inference_weights=False``, or ``with weight_packing(False):`` around the calls);
- the private ops exist and give the right answer on this machine (``packing_available``) and oneDNN is
  not switched off (``torch.backends.mkldnn.flags(enabled=False)``): builds without oneDNN, other CPUs'
  builds and CUDA tensors take today's ``F.linear`` path.

A packed copy is rebuilt whenever its parameter may have changed: the key is the parameter's version
counter (bumped by every in-place update autograd sees: optimizer steps, ``load_state_dict``), its storage
address (changed by ``param.data = ...``) and a sample of its values (changed by in-place edits through
``param.data``, which bypass the version counter: PEFT's ``merge`` / ``unmerge`` do ``param.data += delta``).
Only an edit through ``.data`` that leaves every sampled element unchanged goes unseen;
``release_packed_weights(model)`` drops every copy after such an edit. Copies live in a table keyed by the
parameter's identity, not on the module: ``deepcopy``, pickling and ``state_dict`` never see them, and a
parameter's copy is freed with the parameter. Their memory, about the size of the weights they pack, is
reported by ``packed_weight_bytes(model)``.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.weak import WeakIdKeyDictionary

__all__ = [
    "FUSED_ACTIVATIONS",
    "packed_expert_weights",
    "packed_linear",
    "packed_weight_bytes",
    "packing_available",
    "release_packed_weights",
    "weight_packing",
]

# Activations the packed GEMM applies in its epilogue with the same numerics as ``ACT2FN[name]``:
# name -> (oneDNN post-op, its algorithm argument).
FUSED_ACTIVATIONS = {"gelu": ("gelu", "none"), "relu": ("relu", "")}
# Elements compared per expert matrix to notice edits through ``param.data`` (see the module docstring).
SAMPLED_ELEMENTS_PER_MATRIX = 64


@dataclass
class PackedWeights:
    """The packed copy of one ``[out, in]`` or ``[experts, out, in]`` parameter and what it was built from."""

    matrices: list[torch.Tensor]
    version: int
    data_ptr: int
    sample: torch.Tensor
    nbytes: int


_PACKED_COPIES = WeakIdKeyDictionary()
# Cleared by ``weight_packing(False)`` for the calls inside it; one flag per process (not per thread).
_SWITCH = {"enabled": True}


@functools.cache
def packing_available() -> bool:
    """Whether oneDNN's private linear ops exist here and reproduce ``F.linear`` on a small probe."""
    if not torch.backends.mkldnn.is_available():
        return False
    # The probe is cached for the process: it must not run in whatever autocast region first asks.
    with torch.autocast("cpu", enabled=False):
        return _probe_packing()


def _probe_packing() -> bool:
    try:
        weight = torch.arange(12, dtype=torch.float32).view(3, 4) / 7
        inputs = torch.linspace(-1, 1, 8).view(2, 4)
        bias = torch.tensor([0.5, -0.25, 1.0])
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
        result = torch.ops.mkldnn._linear_pointwise(inputs, packed, bias, "none", [], "")
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return bool(torch.allclose(result, F.linear(inputs, weight, bias), rtol=0, atol=1e-6))


@contextlib.contextmanager
def weight_packing(enabled: bool):
    """Switch packed inference weights off (``False``) or back on for the calls made inside the block."""
    if not isinstance(enabled, bool):
        raise ValueError(f"weight_packing: `enabled` must be True or False, got {enabled!r}.")
    previous = _SWITCH["enabled"]
    _SWITCH["enabled"] = enabled
    try:
        yield
    finally:
        _SWITCH["enabled"] = previous


def _sample(weight: torch.Tensor) -> torch.Tensor:
    """A fixed spread of elements of every matrix of ``weight`` (``[..., out, in]``), copied."""
    matrices = weight.detach().reshape(-1, weight.shape[-2] * weight.shape[-1])
    step = max(1, matrices.shape[1] // SAMPLED_ELEMENTS_PER_MATRIX)
    return matrices[:, ::step].clone()


def _is_current(entry: PackedWeights, weight: torch.Tensor) -> bool:
    return (
        entry.version == weight._version
        and entry.data_ptr == weight.data_ptr()
        and torch.equal(entry.sample, _sample(weight))
    )


def packed_expert_weights(weight: torch.Tensor, module: nn.Module, enabled: bool) -> list[torch.Tensor] | None:
    """The packed copies of ``weight``'s matrices (one per expert for ``[E, out, in]``), or ``None`` when the
    caller must run the plain ``F.linear`` path (see the module docstring for when)."""
    if (
        not enabled
        or not _SWITCH["enabled"]
        or module.training
        or torch.is_grad_enabled()
        or torch.compiler.is_compiling()
        or torch.compiler.is_exporting()
        or torch.jit.is_tracing()
        or not isinstance(weight, nn.Parameter)
        or weight.device.type != "cpu"
        or weight.dtype != torch.float32
        # Under CPU autocast (e.g. Accelerate's bf16 evaluation) F.linear computes in the autocast dtype; the packed
        # fp32 op would not, so the plain path keeps autocast's semantics.
        or torch.is_autocast_enabled("cpu")
        or not torch.backends.mkldnn.enabled  # switched off by the user: torch.backends.mkldnn.flags(enabled=False)
        or not packing_available()
    ):
        return None
    entry = _PACKED_COPIES.get(weight)
    if entry is None or not _is_current(entry, weight):
        entry = _pack(weight)
        _PACKED_COPIES[weight] = entry
    return entry.matrices


def _pack(weight: torch.Tensor) -> PackedWeights:
    stacked = weight.detach().reshape(-1, weight.shape[-2], weight.shape[-1])
    matrices = [torch.ops.mkldnn._reorder_linear_weight(matrix.contiguous(), None) for matrix in stacked]
    return PackedWeights(
        matrices=matrices,
        version=weight._version,
        data_ptr=weight.data_ptr(),
        sample=_sample(weight),
        nbytes=sum(matrix.numel() * matrix.element_size() for matrix in matrices),
    )


def packed_linear(
    rows: torch.Tensor, packed_weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None = None
) -> torch.Tensor:
    """``activation(F.linear(rows, W, bias))`` with ``W`` packed; ``activation`` one of ``FUSED_ACTIVATIONS``."""
    post_op, algorithm = FUSED_ACTIVATIONS[activation] if activation is not None else ("none", "")
    return torch.ops.mkldnn._linear_pointwise(rows.contiguous(), packed_weight, bias, post_op, [], algorithm)


def packed_weight_bytes(model: nn.Module) -> int:
    """Bytes held by the packed copies of ``model``'s parameters (their logical size; oneDNN may pad)."""
    return sum(entry.nbytes for parameter in model.parameters() if (entry := _PACKED_COPIES.get(parameter)))


def release_packed_weights(model: nn.Module) -> None:
    """Drop the packed copies of ``model``'s parameters (rebuilt on the next packed call)."""
    for parameter in model.parameters():
        _PACKED_COPIES.pop(parameter, None)
