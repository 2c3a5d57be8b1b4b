"""Linear weights packed once for oneDNN, the CPU GEMM library of PyTorch, and the products that use them.

Why: ``F.linear`` on CPU re-lays-out ("packs") its weight matrix into the GEMM kernel's blocked format on every
call. For one large matrix that cost is small next to the multiplication; for an expert that multiplies only its own
few tokens, or a projection followed by an activation or a residual add (each a pass over memory of its own), it is
not. oneDNN packs a weight once (``mkldnn._reorder_linear_weight``) and multiplies with the packed copy
(``mkldnn._linear_pointwise``), with the exact GELU / ReLU or the residual add in the GEMM's epilogue.

A packed copy is used only where it gives ``F.linear``'s semantics: eval mode, autograd recording nothing, nothing
traced, compiled or exported, no CPU autocast, a float32 CPU weight, and oneDNN available and switched on
(``packing_applies``). It is rebuilt when its weight may have changed: the stamp is the parameter's version counter
(bumped by optimizer steps and ``load_state_dict``), its storage address (``param.data = ...``) and a sample of its
values (in-place edits through ``param.data``, as PEFT's merge does).
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "FUSED_ACTIVATIONS",
    "PackedMatrices",
    "packed_linear",
    "packed_linear_add",
    "packing_applies",
    "packing_available",
]

# Activations the packed GEMM applies in its epilogue with the numerics of ``ACT2FN[name]``:
# name → (oneDNN post-op, its algorithm argument).
FUSED_ACTIVATIONS = {"gelu": ("gelu", "none"), "relu": ("relu", "")}
# Elements compared per matrix to notice edits through ``param.data`` (module docstring).
_SAMPLED_ELEMENTS_PER_MATRIX = 64


@functools.cache
def packing_available() -> bool:
    """Whether oneDNN's private linear ops exist here and reproduce ``F.linear`` on a small probe."""
    if not torch.backends.mkldnn.is_available():
        return False
    with torch.autocast("cpu", enabled=False):
        try:
            weight = torch.arange(12, dtype=torch.float32).view(3, 4) / 7
            inputs = torch.linspace(-1, 1, 8).view(2, 4)
            bias = torch.tensor([0.5, -0.25, 1.0])
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
            result = torch.ops.mkldnn._linear_pointwise(inputs, packed, bias, "none", [], "")
        except (AttributeError, RuntimeError, NotImplementedError):
            return False
        return bool(torch.allclose(result, F.linear(inputs, weight, bias), rtol=0, atol=1e-6))


def packing_applies(module: nn.Module, weight: torch.Tensor) -> bool:
    """Whether ``module`` may multiply with a packed copy of ``weight`` now (module docstring)."""
    return not (
        module.training
        or torch.is_grad_enabled()
        or torch.compiler.is_compiling()
        or torch.compiler.is_exporting()
        or torch.jit.is_tracing()
        # Under CPU autocast F.linear computes in the autocast dtype; the packed fp32 op would not.
        or torch.is_autocast_enabled("cpu")
        or not torch.backends.mkldnn.enabled
        or not isinstance(weight, nn.Parameter)
        or weight.device.type != "cpu"
        or weight.dtype != torch.float32
        or not packing_available()
    )


def _sample(weight: torch.Tensor) -> torch.Tensor:
    """A view of a fixed spread of elements of every matrix of ``weight`` (``[..., out, in]``)."""
    width = weight.shape[-2] * weight.shape[-1]
    matrices = weight.detach().reshape(-1, width)
    return matrices[:, :: max(1, width // _SAMPLED_ELEMENTS_PER_MATRIX)]


class PackedMatrices:
    """The packed copies of one ``[out, in]`` or ``[experts, out, in]`` parameter, rebuilt when it changes.

    oneDNN's packed tensors have no storage that ``copy.deepcopy`` or pickle could read, so a copy of a model (or a
    pickled one) carries an empty cache, which its first packed call fills from the copied weights."""

    def __init__(self):
        self.matrices: list[torch.Tensor] = []
        self._stamp: tuple | None = None
        self._live_sample: torch.Tensor | None = None

    def __deepcopy__(self, memo) -> PackedMatrices:
        return PackedMatrices()

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()

    def current(self, weight: torch.Tensor) -> list[torch.Tensor]:
        if not self._matches(weight):
            stacked = weight.detach().reshape(-1, weight.shape[-2], weight.shape[-1])
            self.matrices = [torch.ops.mkldnn._reorder_linear_weight(m.contiguous(), None) for m in stacked]
            self._live_sample = _sample(weight)
            self._stamp = (weight._version, weight.data_ptr(), self._live_sample.clone())
        return self.matrices

    def _matches(self, weight: torch.Tensor) -> bool:
        if self._stamp is None:
            return False
        version, address, sample = self._stamp
        return version == weight._version and address == weight.data_ptr() and torch.equal(sample, self._live_sample)

    @property
    def nbytes(self) -> int:
        return sum(matrix.numel() * matrix.element_size() for matrix in self.matrices)


def packed_linear(
    rows: torch.Tensor, packed_weight: torch.Tensor, bias: torch.Tensor | None, activation: str | None = None
) -> torch.Tensor:
    """``activation(F.linear(rows, W, bias))`` with ``W`` packed; ``activation`` one of ``FUSED_ACTIVATIONS``."""
    post_op, algorithm = FUSED_ACTIVATIONS[activation] if activation is not None else ("none", "")
    return torch.ops.mkldnn._linear_pointwise.default(rows.contiguous(), packed_weight, bias, post_op, [], algorithm)


def packed_linear_add(
    rows: torch.Tensor, others: torch.Tensor, packed_weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """``F.linear(rows, W, bias) + others`` with ``W`` packed, the addition in the GEMM's epilogue."""
    return torch.ops.mkldnn._linear_pointwise.binary(
        rows.contiguous(), others.contiguous(), packed_weight, bias, "add"
    )
