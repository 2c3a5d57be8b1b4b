"""Linear weights packed once for the CPU's GEMM library, for inference (eval mode, no gradients).

Why: ``F.linear`` on CPU re-lays-out ("packs") its weight matrix into the GEMM kernel's blocked format on
every call. For one large matrix that cost is small next to the multiplication; for a mixture of experts,
where each expert multiplies only its own few tokens, it dominates (issue 2 measured the 4-expert layer at
2.2× one expert FFN for that reason). oneDNN can pack a weight once (``mkldnn._reorder_linear_weight``)
and multiply with the packed copy (``mkldnn._linear_pointwise``, which also fuses the exact GELU and ReLU
into the GEMM); this module keeps such packed copies and hands them to the MoE layer and to the dense layers of
every family (``dense_implementations``, which also multiplies several projections of one input as one packed
GEMM). Whether a model uses them at all is its config's ``dense_implementation`` / ``moe_implementation``.

When a packed copy is used, all at once:
- the module is in eval mode and autograd records nothing (``torch.no_grad`` / ``torch.inference_mode``):
  training and ``model.train()`` numerics never go through it;
- nothing is being traced, compiled or exported (inductor's freezing packs weights its own way);
- the weight is a float32 CPU ``nn.Parameter`` (not a tensor computed on the fly, as PEFT's unmerged LoRA
  on ``target_parameters`` gives);
- the private ops exist and give the right answer on this machine (``packing_available``) and oneDNN is
  not switched off (``torch.backends.mkldnn.flags(enabled=False)``): builds without oneDNN, other CPUs'
  builds and CUDA tensors take today's ``F.linear`` path.

A packed copy is rebuilt whenever its parameter may have changed: the key is the parameter's version
counter (bumped by every in-place update autograd sees: optimizer steps, ``load_state_dict``), its storage
address (changed by ``param.data = ...``) and a sample of its values (changed by in-place edits through
``param.data``, which bypass the version counter: PEFT's ``merge`` / ``unmerge`` do ``param.data += delta``).
Only an edit through ``.data`` that leaves every sampled element unchanged goes unseen;
``release_packed_weights(model)`` (``packed_weight_memory``) drops every copy after such an edit. Copies live in a table keyed by the
parameter's identity, not on the module: ``deepcopy``, pickling and ``state_dict`` never see them, and a
parameter's copy is freed with the parameter. Their memory, about the size of the weights they pack, is
reported by ``packed_weight_bytes(model)`` (``packed_weight_memory``).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.weak import WeakIdKeyDictionary

__all__ = [
    "FUSED_ACTIVATIONS",
    "PackedLinearGroup",
    "packed_expert_weights",
    "packed_linear_group",
    "packed_linear",
    "packed_linear_add",
    "packing_applies_now",
    "packing_available",
]

# Activations the packed GEMM applies in its epilogue with the same numerics as ``ACT2FN[name]``:
# name -> (oneDNN post-op, its algorithm argument).
FUSED_ACTIVATIONS = {"gelu": ("gelu", "none"), "relu": ("relu", "")}
# Elements compared per expert matrix to notice edits through ``param.data`` (see the module docstring).
SAMPLED_ELEMENTS_PER_MATRIX = 64


class ParameterStamp:
    """What a packed copy was built from, to tell whether its parameter changed since (module docstring): the
    version counter, the storage address, and a sample of the values both as kept then and as a live view of the
    parameter's storage (comparing the two is one small ``torch.equal`` per call)."""

    __slots__ = ("data_ptr", "live_sample", "sample", "version")

    def __init__(self, parameter: torch.Tensor):
        self.version = parameter._version
        self.data_ptr = parameter.data_ptr()
        self.live_sample = _sample(parameter)
        self.sample = self.live_sample.clone()

    def matches(self, parameter: torch.Tensor) -> bool:
        return (
            self.version == parameter._version
            and self.data_ptr == parameter.data_ptr()
            and torch.equal(self.sample, self.live_sample)
        )


@dataclass
class PackedWeights:
    """The packed copy of one ``[out, in]`` or ``[experts, out, in]`` parameter and what it was built from."""

    matrices: list[torch.Tensor]
    stamp: ParameterStamp
    nbytes: int


@dataclass
class PackedLinearGroup:
    """One packed ``[sum of outs, in]`` matrix for linear maps that read the same input, their biases joined
    (the bias parameter itself for a group of one: no copy to keep current), and the output widths."""

    matrix: torch.Tensor
    bias: torch.Tensor | None
    widths: tuple[int, ...]
    stamps: tuple[ParameterStamp, ...]  # of each weight, and of each bias that was joined
    nbytes: int


_PACKED_COPIES = WeakIdKeyDictionary()
# Groups keyed by their first module (a C-level weak reference: the lookup is fast), then by the identities of
# all their modules.
_PACKED_GROUPS = weakref.WeakKeyDictionary()


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


def _sample(weight: torch.Tensor) -> torch.Tensor:
    """A view of a fixed spread of elements of every matrix of ``weight`` (``[..., out, in]``, or a bias)."""
    width = weight.shape[-2] * weight.shape[-1] if weight.dim() > 1 else weight.shape[-1]
    matrices = weight.detach().reshape(-1, width)
    return matrices[:, :: max(1, width // SAMPLED_ELEMENTS_PER_MATRIX)]


def _packing_applies(weight: torch.Tensor, module: nn.Module) -> bool:
    """Whether ``module`` may multiply with a packed copy of ``weight`` now (see the module docstring)."""
    return packing_applies_now() and _packable(weight, module)


def packing_applies_now() -> bool:
    """The conditions that do not depend on the module (module docstring)."""
    return not (
        torch.is_grad_enabled()
        or torch.compiler.is_compiling()
        or torch.compiler.is_exporting()
        or torch.jit.is_tracing()
        # Under CPU autocast (e.g. Accelerate's bf16 evaluation) F.linear computes in the autocast dtype; the packed
        # fp32 op would not, so the plain path keeps autocast's semantics.
        or torch.is_autocast_enabled("cpu")
        or not torch.backends.mkldnn.enabled  # switched off by the user: torch.backends.mkldnn.flags(enabled=False)
        or not packing_available()
    )


def _packable(weight: torch.Tensor, module: nn.Module) -> bool:
    return (
        not module.training
        and isinstance(weight, nn.Parameter)
        and weight.device.type == "cpu"
        and weight.dtype == torch.float32
    )


def packed_expert_weights(weight: torch.Tensor, module: nn.Module) -> list[torch.Tensor] | None:
    """The packed copies of ``weight``'s matrices (one per expert for ``[E, out, in]``), or ``None`` when the
    caller must run the plain ``F.linear`` path (see the module docstring for when)."""
    if not _packing_applies(weight, module):
        return None
    entry = _PACKED_COPIES.get(weight)
    if entry is None or not entry.stamp.matches(weight):
        entry = _pack(weight)
        _PACKED_COPIES[weight] = entry
    return entry.matrices


def _pack(weight: torch.Tensor) -> PackedWeights:
    stacked = weight.detach().reshape(-1, weight.shape[-2], weight.shape[-1])
    matrices = [torch.ops.mkldnn._reorder_linear_weight(matrix.contiguous(), None) for matrix in stacked]
    return PackedWeights(
        matrices=matrices,
        stamp=ParameterStamp(weight),
        nbytes=sum(matrix.numel() * matrix.element_size() for matrix in matrices),
    )


def packed_linear_group(linears: tuple[nn.Linear, ...]) -> PackedLinearGroup | None:
    """One packed matrix for ``linears`` (``nn.Linear`` maps of the same input width), their outputs side by side
    in the given order; ``None`` when the caller must call the modules (a module in training mode or a weight that
    cannot be packed; the caller checks ``packing_applies_now`` first). Called for every dense layer large enough
    to fuse, on every forward pass: a current group is found and checked in a few microseconds."""
    groups = _PACKED_GROUPS.get(linears[0])
    key = tuple(map(id, linears))
    group = None if groups is None else groups.get(key)
    parameters = _tracked_parameters(linears)
    if (
        group is not None
        and not any(linear.training for linear in linears)
        and all(stamp.matches(parameter) for stamp, parameter in zip(group.stamps, parameters))
    ):
        return group
    if not all(_packable(linear.weight, linear) for linear in linears):
        return None
    group = _pack_group(linears, parameters)
    _PACKED_GROUPS.setdefault(linears[0], {})[key] = group
    return group


def _tracked_parameters(linears: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, ...]:
    """What a group's copies are built from: the weights, and the biases a larger group joins (a group of one reads
    its bias parameter live). Read from ``_parameters``: ``nn.Module.__getattr__`` costs more than the rest."""
    if len(linears) == 1:
        return (linears[0]._parameters["weight"],)
    return tuple(
        p for linear in linears for p in (linear._parameters["weight"], linear._parameters["bias"]) if p is not None
    )


def _pack_group(linears: tuple[nn.Linear, ...], parameters: tuple[torch.Tensor, ...]) -> PackedLinearGroup:
    weights = [linear.weight.detach() for linear in linears]
    matrix = torch.ops.mkldnn._reorder_linear_weight(torch.cat(weights).contiguous(), None)
    if len(linears) == 1:
        bias = linears[0].bias
    elif all(linear.bias is None for linear in linears):
        bias = None
    else:
        bias = torch.cat(
            [
                linear.bias.detach() if linear.bias is not None else weight.new_zeros(weight.shape[0])
                for linear, weight in zip(linears, weights)
            ]
        )
    joined_bytes = bias.numel() * bias.element_size() if bias is not None and len(linears) > 1 else 0
    return PackedLinearGroup(
        matrix=matrix,
        bias=bias,
        widths=tuple(weight.shape[0] for weight in weights),
        stamps=tuple(ParameterStamp(p) for p in parameters),
        nbytes=sum(weight.numel() * weight.element_size() for weight in weights) + joined_bytes,
    )


def packed_linear(
    rows: torch.Tensor, packed_weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None = None
) -> torch.Tensor:
    """``activation(F.linear(rows, W, bias))`` with ``W`` packed; ``activation`` one of ``FUSED_ACTIVATIONS``."""
    post_op, algorithm = FUSED_ACTIVATIONS[activation] if activation is not None else ("none", "")
    return _onednn_ops().unary(rows.contiguous(), packed_weight, bias, post_op, [], algorithm)


def packed_linear_add(
    rows: torch.Tensor, others: torch.Tensor, packed_weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """``F.linear(rows, W, bias) + others`` with ``W`` packed, the addition in the GEMM's epilogue."""
    return _onednn_ops().binary(rows.contiguous(), others.contiguous(), packed_weight, bias, "add")


@functools.cache
def _onednn_ops() -> SimpleNamespace:
    """The oneDNN linear overloads, looked up once (``torch.ops`` attribute chains cost a microsecond per call)."""
    return SimpleNamespace(
        unary=torch.ops.mkldnn._linear_pointwise.default, binary=torch.ops.mkldnn._linear_pointwise.binary
    )
