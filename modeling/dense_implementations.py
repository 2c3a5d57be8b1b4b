"""Dense projections behind an interface, in the style of transformers' attention interface.

The modeling code calls ``dense_linear(config, linear, inputs, activation=, dropout=, residual=)`` (one projection
with what follows it) and ``dense_joined(config, linears, inputs)`` (projections of one input), and
``config.dense_implementation`` selects what computes them:

- ``"eager"``: the modules, as written: ``dropout(activation(linear(inputs))) + residual``.
- ``"onednn"``: at inference on CPU, oneDNN GEMMs on weights packed once (``packed_weights``), with the bias,
  ReLU / exact GELU and the residual add in the GEMM's epilogue, and projections of one input (query, key and
  value; MobileBERT's two input bottlenecks) as one GEMM over the joined weights. Why: ``nn.Linear`` re-packs its
  weight on every call and each epilogue step is a pass over memory of its own; fused, IB-BERT-large takes
  0.89-0.92x and BERT-base 0.91-0.95x the plain modules' time at batch 1 x 128 on the development machine
  (``benchmarks/bench_preset_latency.py``). Outputs equal the modules' to float32 rounding (tested at 1e-5).
- ``"auto"`` (default): ``"onednn"`` for the calls this machine's measurements say it speeds up, ``"eager"``
  for the others: each call shape (widths, rows, what follows the GEMM) is timed the first time it is seen and the
  ratio kept on disk (``implementation_probe``); a clear ratio overrides the development machine's rule (fuse from
  2^25 multiply-adds per call), an ambiguous one keeps it (``probed_fusion``). Why per shape: on the development
  machine the fused path takes 0.6-0.9x the time of 384-wide projections with GELU and 1.1-2.9x that of 128-wide
  ones with as many multiply-adds, and on a 2-core AVX-512 EPYC it paid for MobileBERT from batch 1.

``"onednn"`` computes with the modules' parameters without calling them: a forward hook on one of those
``nn.Linear`` modules does not fire, as a hook on attention probabilities sees none under SDPA attention. Where the
packed path cannot give the modules' exact semantics it runs ``"eager"``: training mode, gradients recorded,
compiling, tracing or exporting, CPU autocast, not float32 or not on CPU (Accelerate's offloaded weights wait on
the meta device), oneDNN off or unavailable, or a projection that is not a plain ``nn.Linear`` (PEFT's LoRA wrapper,
a quantized layer). To observe the projections through hooks, select ``"eager"``
(``with selected_implementations(model, dense="eager")``), as ``signals.SubmoduleRecorder`` does while it records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import nn
from transformers.activations import GELUActivation

from .implementation_interface import ImplementationInterface
from .implementation_probe import median_seconds, on_forget, probed_choice
from .packed_weights import (
    PackedLinearGroup,
    packed_linear,
    packed_linear_add,
    packed_linear_group,
    packing_applies_now,
)

__all__ = [
    "ALL_DENSE_IMPLEMENTATIONS",
    "DenseImplementation",
    "OneDNNDense",
    "dense_joined",
    "dense_linear",
    "DenseShape",
    "probed_fusion",
]


class DenseImplementation:
    """The plain modules (``"eager"``); other implementations override both methods and may fall back to these."""

    def linear(
        self,
        linear: nn.Module,
        inputs: torch.Tensor,
        activation: nn.Module | None = None,
        dropout: nn.Module | None = None,
        residual: torch.Tensor | None = None,
    ) -> torch.Tensor:
        outputs = linear(inputs)
        if activation is not None:
            outputs = activation(outputs)
        if dropout is not None:
            outputs = dropout(outputs)
        return outputs if residual is None else outputs + residual

    def joined(self, linears: Sequence[nn.Module], inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(linear(inputs) for linear in linears)


def _fused_activation(activation: nn.Module | None) -> str | None:
    """oneDNN's epilogue name for ``activation`` where it computes the same function, else ``None``."""
    if isinstance(activation, nn.ReLU):
        return "relu"
    if isinstance(activation, GELUActivation) and activation.act is nn.functional.gelu:
        return "gelu"
    return None


# From this many multiply-adds per call the fused and the plain GEMM took about the same time on the development
# machine (0.9-1.1x at 512 rows, every shape tried), and one measurement would take seconds: fused, unmeasured.
_ALWAYS_FUSED_FROM = 1 << 28
# The prior of ``probed_fusion`` (the rule measured on the development machine), and the measured time ratios
# (fused / plain) that clearly overturn it.
_FUSED_FROM = 1 << 25
_CLEAR_WIN, _CLEAR_LOSS = 0.90, 1.10


class DenseShape(NamedTuple):
    """A dense call as the fusion decision sees it: what follows the GEMM (``"gelu"``, ``"relu"``, ``"residual"``
    or ``"none"``), the widths, how many projections are joined, and the rows rounded up to a power of two (so that
    sequence lengths share verdicts)."""

    epilogue: str
    in_features: int
    out_features: int
    projections: int
    rows: int

    @property
    def multiply_adds(self) -> int:
        return self.rows * self.in_features * self.out_features


class OneDNNDense(DenseImplementation):
    """Packed, epilogue-fused, joined GEMMs where ``fuses(shape)`` says they pay (module docstring); elsewhere, or
    where the packed path cannot run, the plain modules."""

    def __init__(self, fuses: Callable[[DenseShape], bool]):
        self.fuses = fuses
        # (epilogue, widths, projections, rows, threads) → verdict: one dictionary lookup per call once seen.
        self._verdicts: dict[tuple[str, int, int, int, int, int], bool] = {}
        on_forget(self._verdicts.clear)

    def _group(self, linears: tuple[nn.Module, ...], inputs: torch.Tensor, epilogue: str) -> PackedLinearGroup | None:
        """The packed group for ``linears`` where the packed path applies now and pays, else ``None``.
        Runs for every dense layer of a forward pass: cheapest checks first, the plain path in about a microsecond
        (training, compiling, tracing: before anything else, so that a traced graph never reaches the probe)."""
        if torch.is_grad_enabled() or torch.compiler.is_compiling() or torch.jit.is_tracing():
            return None
        if len(linears) == 1:
            if type(linears[0]) is not nn.Linear:
                return None
            out_features = linears[0].out_features
        elif any(type(linear) is not nn.Linear for linear in linears):
            return None
        else:
            out_features = sum(linear.out_features for linear in linears)
        width = linears[0].in_features
        rows = inputs.numel() // width
        key = (epilogue, width, out_features, len(linears), rows, torch.get_num_threads())
        fuses = self._verdicts.get(key)
        if fuses is None:
            bucket = 1 << max(rows - 1, 0).bit_length()
            fuses = self._verdicts[key] = bool(
                self.fuses(DenseShape(epilogue, width, out_features, len(linears), bucket))
            )
        if not fuses or not packing_applies_now():
            return None
        return packed_linear_group(linears)

    def linear(self, linear, inputs, activation=None, dropout=None, residual=None):
        fused_name = None if activation is None else _fused_activation(activation)
        group = None
        if (activation is None or fused_name is not None) and (dropout is None or not dropout.training):
            epilogue = fused_name or ("residual" if residual is not None else "none")
            group = self._group((linear,), inputs, epilogue)
        if group is None:
            return super().linear(linear, inputs, activation, dropout, residual)
        rows = inputs.reshape(-1, inputs.shape[-1])
        if residual is not None and fused_name is None:
            others = residual.reshape(rows.shape[0], -1).contiguous()
            outputs = packed_linear_add(rows, others, group.matrix, group.bias)
        else:
            outputs = packed_linear(rows, group.matrix, group.bias, fused_name)
            if residual is not None:  # the activation comes before the addition: not one epilogue
                outputs = outputs + residual.reshape(rows.shape[0], -1)
        return outputs.view(*inputs.shape[:-1], outputs.shape[-1])

    def joined(self, linears, inputs):
        group = self._group(tuple(linears), inputs, "none")
        if group is None:
            return super().joined(linears, inputs)
        joined = packed_linear(inputs.reshape(-1, inputs.shape[-1]), group.matrix, group.bias)
        return tuple(part.view(*inputs.shape[:-1], part.shape[-1]) for part in joined.split(group.widths, dim=-1))


def _measure_fusion(shape: DenseShape) -> float:
    """The probe of ``implementation_probe`` for one shape: eight different projections of that shape (the weights
    of a model are not all in cache: eight sets of weights keep the GEMM's weight reads about as cold as a model's;
    one set, always in cache, hides the per-call re-packing that fusing saves), fused against the plain modules, 11
    interleaved rounds; the fused path's time over the plain one's (medians)."""
    generator = torch.Generator().manual_seed(0)
    width = shape.out_features // shape.projections
    activation = {"gelu": GELUActivation(), "relu": nn.ReLU()}.get(shape.epilogue)
    groups = []
    for _ in range(8):
        linears = tuple(nn.Linear(shape.in_features, width).eval() for _ in range(shape.projections))
        with torch.no_grad():
            for linear in linears:
                linear.weight.copy_(torch.randn(linear.weight.shape, generator=generator) * 0.05)
        groups.append(linears)
    inputs = torch.randn(shape.rows, shape.in_features, generator=generator)
    residual = torch.randn(shape.rows, width, generator=generator) if shape.epilogue == "residual" else None

    def run(implementation: DenseImplementation) -> None:
        for linears in groups:
            if len(linears) > 1:
                implementation.joined(linears, inputs)
            else:
                implementation.linear(linears[0], inputs, activation, None, residual)

    eager, fused = DenseImplementation(), OneDNNDense(lambda shape: True)
    times = median_seconds({"eager": lambda: run(eager), "fused": lambda: run(fused)}, rounds=11)
    return round(times["fused"] / times["eager"], 3)


def probed_fusion(shape: DenseShape) -> bool:
    """Whether ``"auto"`` fuses a call of ``shape`` on this machine.

    The prior is the rule measured on the development machine: fuse from 2^25 multiply-adds per call. The
    shape's measured time ratio (fused / plain, measured the first time the shape is seen, then read from the
    probe file) overrides it only where it is clear: a shape below 2^25 fuses if fusing measured at most 0.90x,
    one above stays plain if fusing measured more than 1.10x. Why not the bare measurement: a single shape's ratio
    moves by ±10% between runs on a shared 2-core machine (0.91-1.12x for MiniLM's GELU projection), while a whole
    MiniLM runs 5-10% faster with those borderline shapes fused; a clear difference (MobileBERT's 128-wide
    projections: 1.1-2.9x; a machine where fusing pays from batch 1: 0.76x) is not noise. With probing off: the
    prior."""
    prior = shape.multiply_adds >= _FUSED_FROM
    if shape.multiply_adds >= _ALWAYS_FUSED_FROM:
        return True
    name = "dense {} {}x{}/{} rows {}".format(*shape)
    ratio = probed_choice(name, functools.partial(_measure_fusion, shape), None)
    if ratio is None:
        return prior
    return ratio <= _CLEAR_LOSS if prior else ratio <= _CLEAR_WIN


class DenseInterface(ImplementationInterface):
    """Name → dense implementation; ``DenseInterface.register(name, implementation)`` adds one."""

    config_field = "dense_implementation"
    _global_mapping = {
        "eager": DenseImplementation(),
        "onednn": OneDNNDense(lambda shape: True),
        "auto": OneDNNDense(probed_fusion),
    }


ALL_DENSE_IMPLEMENTATIONS = DenseInterface()


def dense_linear(
    config,
    linear: nn.Module,
    inputs: torch.Tensor,
    *,
    activation: nn.Module | None = None,
    dropout: nn.Module | None = None,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """``dropout(activation(linear(inputs))) + residual`` (each part optional), by ``config.dense_implementation``."""
    implementation = ALL_DENSE_IMPLEMENTATIONS.get_interface(config.dense_implementation)
    return implementation.linear(linear, inputs, activation, dropout, residual)


def dense_joined(config, linears: Sequence[nn.Module], inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``tuple(linear(inputs) for linear in linears)``, by ``config.dense_implementation``."""
    return ALL_DENSE_IMPLEMENTATIONS.get_interface(config.dense_implementation).joined(linears, inputs)
