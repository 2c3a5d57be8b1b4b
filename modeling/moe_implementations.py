"""Expert kernels behind an interface, in the style of transformers' experts interface.

The stacked-expert modules (``moe_layer.ExpertLinear``: one linear map per expert, for MoE attention;
``moe_layer.MoEExperts``: one FFN per expert) hand their tokens, grouped by expert (``ExpertDispatch``), to the
implementation named by ``config.moe_implementation``:

- ``"eager"``: a loop over the experts, ``F.linear`` on each expert's contiguous slice of tokens.
- ``"grouped_mm"``: every expert's product in one ``torch._grouped_mm`` call (``grouped_gemm``; the loop where the
  op cannot run). Why: with many experts the loop's small, under-filled GEMMs dominate, forward and backward.
- ``"onednn"``: at inference on CPU, the loop on expert matrices packed once for oneDNN (``packed_weights``), the
  FFN's activation in the first GEMM's epilogue. Why: ``F.linear`` re-packs each expert's matrix on every call, and
  for an expert with a few tokens that costs more than the product. Elsewhere (training, not CPU float32): the loop.
- ``"batched"``: each token through its own expert's weights in one batched product per projection, no loop: the
  static form exported graphs use (``batched_experts``).
- ``"auto"`` (default): at inference on CPU whichever of the three is fastest on this machine for the call's shape
  (experts, widths, tokens), measured the first time the shape is seen and kept on disk (``implementation_probe``);
  in training, and on CUDA, ``"grouped_mm"`` where the op runs; else the loop.

All give the loop's outputs to float32 rounding (tested at 1e-5, gradients included).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from .batched_experts import BatchedExperts
from .grouped_gemm import grouped_gemm_supported, grouped_linear_rows
from .implementation_interface import ImplementationInterface
from .implementation_probe import CHOICE_MARGIN, median_seconds, on_forget, probed_choice
from .packed_weights import packed_expert_weights, packed_linear, packing_applies_now

__all__ = [
    "ALL_MOE_IMPLEMENTATIONS",
    "AutoExperts",
    "EagerExperts",
    "ExpertDispatch",
    "exporting",
    "GroupedExperts",
    "OneDNNExperts",
    "ExpertShape",
    "probed_expert_kernel",
]


def exporting() -> bool:
    """Whether the call is traced (export, compile, TorchScript): the dispatch takes its static form."""
    return torch.compiler.is_exporting() or torch.compiler.is_compiling() or torch.jit.is_tracing()


class ExpertDispatch:
    """The kept tokens grouped by expert for a ``RoutingDecision``, found once for every expert matrix that
    follows (MoE attention applies four)."""

    def __init__(self, decision, num_experts: int):
        # ``decision``: a ``moe_layer.RoutingDecision`` (its ``expert_index``, ``gate`` and ``keep`` are read).
        self.num_experts = num_experts
        self.num_tokens = decision.expert_index.shape[0]
        self.gate = decision.gate
        target = torch.where(decision.keep, decision.expert_index, num_experts)
        # Each token's expert, ``num_experts`` for a token no expert runs: the export hook. The batched form
        # that exported graphs use (``batched_experts``) reads it instead of the grouping.
        self.target = target
        self.exporting = exporting()
        self._grouping: tuple[torch.Tensor, list[int]] | None = None

    @property
    def grouping(self) -> tuple[torch.Tensor, list[int]]:
        """The kept tokens' positions sorted by expert (stable: in token order within an expert) and each expert's
        token count. Found on first use: the batched export form never asks, and traced eagerly it would only slow
        the export down. (Not ``functools.cached_property``: on Python 3.11 it takes an ``RLock``, which
        ``torch.compile`` cannot trace.)"""
        if self._grouping is None:
            order = torch.argsort(self.target, stable=True)
            counts = torch.bincount(self.target, minlength=self.num_experts + 1).tolist()
            self._grouping = order[: sum(counts[: self.num_experts])], counts[: self.num_experts]
        return self._grouping

    def run(
        self, inputs: torch.Tensor, expert_fn: Callable[[torch.Tensor, int], torch.Tensor], out_features: int
    ) -> torch.Tensor:
        """``expert_fn(rows, expert)`` applied to each expert's rows of ``inputs`` ``[T, in]``; dropped and
        padding tokens get zeros.

        Eager: one gather puts the kept rows in expert order, each expert multiplies its contiguous slice, and one
        scatter puts the results back (two index operations for any number of experts). Traced (compile, export):
        a fixed loop over every expert selects its rows with ``nonzero``, which stays right for any routing."""
        outputs = inputs.new_zeros(self.num_tokens, out_features)
        if self.exporting:
            for expert in range(self.num_experts):
                positions = (self.target == expert).nonzero().squeeze(-1)
                expert_outputs = expert_fn(inputs.index_select(0, positions), expert)
                outputs.index_add_(0, positions, expert_outputs.to(outputs.dtype))
            return outputs
        order, counts = self.grouping
        slices = inputs.index_select(0, order).split(counts)
        results = [expert_fn(rows, expert) for expert, rows in enumerate(slices) if rows.shape[0] > 0]
        if results:
            outputs.index_copy_(0, order, torch.cat(results).to(outputs.dtype))
        return outputs

    def run_grouped(
        self,
        inputs: torch.Tensor,
        grouped_fn: Callable[[torch.Tensor, list[int], torch.Tensor], torch.Tensor],
        out_features: int,
    ) -> torch.Tensor:
        """``grouped_fn(rows, counts, row_experts)`` applied once to the kept rows of ``inputs`` sorted by expert
        (``counts`` rows per expert, ``row_experts`` each row's expert): the grouped-GEMM form of ``run``."""
        outputs = inputs.new_zeros(self.num_tokens, out_features)
        order, counts = self.grouping
        if order.numel() > 0:
            results = grouped_fn(inputs.index_select(0, order), counts, self.target.index_select(0, order))
            outputs.index_copy_(0, order, results.to(outputs.dtype))
        return outputs


class EagerExperts:
    """The per-expert loop; the other implementations fall back to it where they cannot run."""

    def linear(self, module: nn.Module, inputs: torch.Tensor, dispatch) -> torch.Tensor:
        # One unbind per call, not weight[expert] per expert: the backward of each indexing writes a zero gradient
        # the size of all experts (64 experts: 64 full-size writes per step); unbind's backward stacks once.
        weights, biases = module.weight.unbind(0), module.bias.unbind(0)
        return dispatch.run(
            inputs, lambda rows, expert: F.linear(rows, weights[expert], biases[expert]), module.out_features
        )

    def ffn(self, module: nn.Module, inputs: torch.Tensor, dispatch) -> torch.Tensor:
        fc1_weights, fc1_biases = module.fc1_weight.unbind(0), module.fc1_bias.unbind(0)
        fc2_weights, fc2_biases = module.fc2_weight.unbind(0), module.fc2_bias.unbind(0)

        def expert_ffn(rows: torch.Tensor, expert: int) -> torch.Tensor:
            hidden = module.act(F.linear(rows, fc1_weights[expert], fc1_biases[expert]))
            return F.linear(hidden, fc2_weights[expert], fc2_biases[expert])

        return dispatch.run(inputs, expert_ffn, module.hidden_size)


class GroupedExperts(EagerExperts):
    """Every expert's product in one ``torch._grouped_mm`` call, where the op runs."""

    def linear(self, module, inputs, dispatch):
        if not grouped_gemm_supported(module.weight):
            return super().linear(module, inputs, dispatch)

        def grouped(rows, counts, row_experts):
            return grouped_linear_rows(rows, module.weight, module.bias, counts, row_experts)

        return dispatch.run_grouped(inputs, grouped, module.out_features)

    def ffn(self, module, inputs, dispatch):
        if not grouped_gemm_supported(module.fc1_weight):
            return super().ffn(module, inputs, dispatch)

        def grouped(rows, counts, row_experts):
            hidden = module.act(grouped_linear_rows(rows, module.fc1_weight, module.fc1_bias, counts, row_experts))
            return grouped_linear_rows(hidden, module.fc2_weight, module.fc2_bias, counts, row_experts)

        return dispatch.run_grouped(inputs, grouped, module.hidden_size)


class OneDNNExperts(EagerExperts):
    """The loop on expert matrices packed once for oneDNN, at inference on CPU."""

    def linear(self, module, inputs, dispatch):
        packed = packed_expert_weights(module.weight, module) if packing_applies_now() else None
        if packed is None:
            return super().linear(module, inputs, dispatch)
        biases = module.bias.unbind(0)
        return dispatch.run(
            inputs, lambda rows, expert: packed_linear(rows, packed[expert], biases[expert]), module.out_features
        )

    def ffn(self, module, inputs, dispatch):
        packed_fc1 = packed_expert_weights(module.fc1_weight, module) if packing_applies_now() else None
        # A LoRA-computed fc1 (no parameter to pack) runs the loop: no fc2 copy for nothing.
        packed_fc2 = None if packed_fc1 is None else packed_expert_weights(module.fc2_weight, module)
        if packed_fc2 is None:
            return super().ffn(module, inputs, dispatch)
        packed = list(zip(packed_fc1, module.fc1_bias.unbind(0), packed_fc2, module.fc2_bias.unbind(0)))

        def expert_ffn(rows, expert):
            fc1, fc1_bias, fc2, fc2_bias = packed[expert]
            if module.fused_activation is not None:
                hidden = packed_linear(rows, fc1, fc1_bias, module.fused_activation)
            else:
                hidden = module.act(packed_linear(rows, fc1, fc1_bias))
            return packed_linear(hidden, fc2, fc2_bias)

        return dispatch.run(inputs, expert_ffn, module.hidden_size)


class ExpertShape(NamedTuple):
    """An expert call as the implementation choice sees it: an FFN (``inner_features`` wide inside) or one linear
    map per expert (``inner_features`` 0), the experts, the widths, and the tokens rounded up to a power of two."""

    num_experts: int
    in_features: int
    inner_features: int
    out_features: int
    tokens: int


def _measure_expert_kernel(shape: ExpertShape) -> str:
    """The probe of ``implementation_probe`` for one shape: each implementation, with its dispatch, at inference on
    ``shape.tokens`` tokens routed at random over the experts; the fastest, unless it is not 3% faster than the
    loop."""
    generator = torch.Generator().manual_seed(0)
    experts, width_in, inner, width_out, tokens = shape
    # A stand-in for ExpertLinear / MoEExperts: the attributes the implementations read.
    module = nn.Module().eval()
    module.num_experts, module.hidden_size, module.out_features = experts, width_out, width_out
    module.act, module.fused_activation = nn.GELU(), "gelu"
    if inner:
        module.fc1_weight = nn.Parameter(torch.randn(experts, inner, width_in, generator=generator) * 0.05)
        module.fc1_bias = nn.Parameter(torch.zeros(experts, inner))
        module.fc2_weight = nn.Parameter(torch.randn(experts, width_out, inner, generator=generator) * 0.05)
        module.fc2_bias = nn.Parameter(torch.zeros(experts, width_out))
    else:
        module.weight = nn.Parameter(torch.randn(experts, width_out, width_in, generator=generator) * 0.05)
        module.bias = nn.Parameter(torch.zeros(experts, width_out))
    routed = SimpleNamespace(
        expert_index=torch.randint(0, experts, (tokens,), generator=generator),
        gate=torch.ones(tokens),
        keep=torch.ones(tokens, dtype=torch.bool),
    )
    inputs = torch.randn(tokens, width_in, generator=generator)

    def run(implementation: EagerExperts) -> None:
        compute = implementation.ffn if inner else implementation.linear
        compute(module, inputs, ExpertDispatch(routed, experts))

    candidates = {"eager": _EAGER, "grouped_mm": _GROUPED, "onednn": _ONEDNN}
    times = median_seconds({name: lambda impl=impl: run(impl) for name, impl in candidates.items()}, rounds=9)
    fastest = min(times, key=times.get)
    return fastest if times[fastest] < CHOICE_MARGIN * times["eager"] else "eager"


def probed_expert_kernel(shape: ExpertShape) -> str:
    """The expert implementation ``"auto"`` uses at inference on CPU for ``shape`` here: measured the first time
    the shape is seen (milliseconds to a second), then read from the probe file; ``"onednn"`` with probing off."""
    name = "experts {}x{}>{}>{} tokens {}".format(*shape)
    return probed_choice(name, functools.partial(_measure_expert_kernel, shape), "onednn")


class AutoExperts(EagerExperts):
    """At CPU inference the probed fastest for the call's shape; in training and on CUDA the grouped GEMM where
    it runs; else the loop (module docstring)."""

    def __init__(self):
        # (shape fields..., threads) → implementation: one dictionary lookup per call once a shape has been seen.
        self._choices: dict[tuple[int, ...], EagerExperts] = {}
        on_forget(self._choices.clear)

    def _choice(self, weight: torch.Tensor, inputs: torch.Tensor, inner: int) -> EagerExperts:
        if weight.device.type == "cpu" and packing_applies_now():
            key = (
                weight.shape[0],
                inputs.shape[-1],
                inner,
                weight.shape[-2] if not inner else inputs.shape[-1],
                inputs.shape[0],
                torch.get_num_threads(),
            )
            choice = self._choices.get(key)
            if choice is None:
                tokens = 1 << max(inputs.shape[0] - 1, 0).bit_length()
                name = probed_expert_kernel(ExpertShape(*key[:4], tokens))
                choice = self._choices[key] = ALL_MOE_IMPLEMENTATIONS.get_interface(name)
            return choice
        if weight.device.type == "cuda" or torch.is_grad_enabled():
            return _GROUPED
        return _EAGER

    def linear(self, module, inputs, dispatch):
        return self._choice(module.weight, inputs, 0).linear(module, inputs, dispatch)

    def ffn(self, module, inputs, dispatch):
        return self._choice(module.fc1_weight, inputs, module.fc1_weight.shape[1]).ffn(module, inputs, dispatch)


_EAGER, _GROUPED, _ONEDNN = EagerExperts(), GroupedExperts(), OneDNNExperts()


class MoEInterface(ImplementationInterface):
    """Name → expert implementation; ``MoEInterface.register(name, implementation)`` adds one."""

    config_field = "moe_implementation"
    _global_mapping = {
        "eager": _EAGER,
        "grouped_mm": _GROUPED,
        "onednn": _ONEDNN,
        "batched": BatchedExperts(),
        "auto": AutoExperts(),
    }


ALL_MOE_IMPLEMENTATIONS = MoEInterface()
