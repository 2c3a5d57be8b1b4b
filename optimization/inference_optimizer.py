"""``optimize_for_inference(model)``: swap a loaded model's projections and experts for oneDNN-packed, fused ones.

The CPU fast path as an explicit call on a loaded model, as ``ipex.optimize`` and BetterTransformer do it, so the
model files hold only the model: nothing is timed, cached or written inside ``forward``. Which modules are swapped
is decided by the named optimizations of one registry (``INFERENCE_OPTIMIZATIONS``, each a *dispatch* function in the
manner of PEFT's backends: given a module, the replacement or ``None``), tried in order for every module:

- ``"experts"``: a compact-bert experts module → ``PackedExperts`` (the per-expert loop on packed matrices, the
  activation fused);
- ``"intermediate"``: ``act(dense(x))`` (BERT's ``BertIntermediate`` and every family's ``…Intermediate``) → the
  projection with exact GELU / ReLU in the GEMM's epilogue;
- ``"residual_output"``: ``LayerNorm(dropout(dense(x)) + residual)`` (``BertSelfOutput``, ``BertOutput`` and the
  families' modules of that form) → the residual add in the GEMM's epilogue;
- ``"linear"``: any other ``nn.Linear`` (query, key, value, poolers, bottlenecks) → a packed ``nn.Linear``.

Whether a packed form pays depends on the machine and the shape (MobileBERT's 128-wide projections ran 1.1-2.9x
*slower* packed on the development machine, MiniLM's 384-wide ones 0.6-0.9x), so by default the call measures, once
per optimization and shape, at ``tokens`` rows, and swaps only where the replacement is faster (``measure=False``:
swap everything the registry accepts). The modules of an encoder's layers are measured in context, on a copy of the
whole stack of layers with and without every module of that optimization and shape swapped (``_decide_in_context``:
alone, a module's weights stay cached between its calls and the packed forms' gain is missed); a shape found only
outside such a stack is measured alone, against the module it replaces. Outputs equal the plain modules' to
float32 rounding. The swap keeps every parameter object and name: the state dict, saving and PEFT see the same
model; training through a swapped module computes what the plain module computes.
"""

from __future__ import annotations

import copy
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers.models.bert import modeling_bert
from transformers.models.roberta import modeling_roberta

from ..models import SPARSE_MODEL_TYPES, family_classes
from .onednn_weights import PackedMatrices, packing_available
from .packed_modules import PackedExperts, PackedLinear, PackedResidualOutput, _fused_activation

__all__ = ["INFERENCE_OPTIMIZATIONS", "OptimizationReport", "optimize_for_inference", "packed_weight_bytes"]

logger = logging.getLogger(__name__)


class PackedIntermediate(nn.Module):
    """``act(dense(x))`` as one packed GEMM with the activation in its epilogue; ``dense`` keeps its name."""

    def __init__(self, intermediate: nn.Module, activation: str):
        super().__init__()
        self.dense = PackedLinear(intermediate.dense, activation)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.dense(hidden_states)


# transformers' own dense encoders whose FFN input projection is an ``…Intermediate`` (dense students are these).
_INTERMEDIATES = (modeling_bert.BertIntermediate, modeling_roberta.RobertaIntermediate)


def _experts(module: nn.Module) -> nn.Module | None:
    if isinstance(module, family_classes("Experts", SPARSE_MODEL_TYPES)):
        return PackedExperts(module)
    return None


def _intermediate(module: nn.Module) -> nn.Module | None:
    if not isinstance(module, (*_INTERMEDIATES, *family_classes("Intermediate"))):
        return None
    activation = _fused_activation(module.intermediate_act_fn)
    if activation is None or type(module.dense) is not nn.Linear:
        return None
    return PackedIntermediate(module, activation)


def _residual_output(module: nn.Module) -> nn.Module | None:
    # The bottleneck families' ``…Output`` adds two residuals (its forward takes three tensors): not of this form.
    residual_forms = (
        modeling_bert.BertSelfOutput,
        modeling_bert.BertOutput,
        modeling_roberta.RobertaSelfOutput,
        modeling_roberta.RobertaOutput,
        *family_classes("SelfOutput"),
        *family_classes("Output", SPARSE_MODEL_TYPES),
        *family_classes("FFNOutput"),
        *family_classes("OutputBottleneck"),
    )
    if isinstance(module, residual_forms) and type(getattr(module, "dense", None)) is nn.Linear:
        return PackedResidualOutput(module)
    return None


def _linear(module: nn.Module) -> nn.Module | None:
    return PackedLinear(module) if type(module) is nn.Linear else None


# Name → dispatch function (module → replacement or None), tried in this order for every module of a model.
INFERENCE_OPTIMIZATIONS: dict[str, Callable[[nn.Module], nn.Module | None]] = {
    "experts": _experts,
    "intermediate": _intermediate,
    "residual_output": _residual_output,
    "linear": _linear,
}


@dataclass
class OptimizationReport:
    """What ``optimize_for_inference`` did: modules swapped per optimization, and the measured time ratios
    (replacement / plain, medians) of the shapes it measured, kept or not."""

    swapped: dict[str, int] = field(default_factory=dict)
    measured: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        swapped = ", ".join(f"{name} {count}" for name, count in self.swapped.items()) or "nothing"
        return f"optimize_for_inference swapped: {swapped}"


def optimize_for_inference(
    model: nn.Module,
    optimizations: tuple[str, ...] | None = None,
    tokens: int = 128,
    measure: bool = True,
) -> OptimizationReport:
    """Swap ``model``'s modules, in place, for the packed forms of ``optimizations`` (default: every registered one,
    ``INFERENCE_OPTIMIZATIONS``); with ``measure``, only those measured faster here at ``tokens`` rows per call (the
    module docstring). Returns what was swapped. Without oneDNN (another CPU build) nothing is swapped."""
    names = tuple(INFERENCE_OPTIMIZATIONS) if optimizations is None else tuple(optimizations)
    unknown = [name for name in names if name not in INFERENCE_OPTIMIZATIONS]
    if unknown:
        raise ValueError(f"Unknown optimization(s) {unknown}; registered: {', '.join(INFERENCE_OPTIMIZATIONS)}.")
    report = OptimizationReport()
    if not packing_available():
        logger.info("optimize_for_inference: oneDNN's packed linear ops are not available here; nothing swapped.")
        return report
    verdicts: dict[tuple, bool] = {}
    if measure:
        for stack in _layer_stacks(model):
            _decide_in_context(stack, names, tokens, report, verdicts)
    replaced: list[str] = []  # the modules inside a replaced one are the replacement's business
    for parent_name, parent in list(model.named_modules()):
        if any(parent_name == name or parent_name.startswith(name + ".") for name in replaced):
            continue
        for child_name, child in list(parent.named_children()):
            for name in names:
                replacement = INFERENCE_OPTIMIZATIONS[name](child)
                if replacement is None:
                    continue
                key = (name, _shape_key(child))
                if measure and key not in verdicts:
                    verdicts[key] = _pays(child, replacement, tokens, report, f"{name} {key[1]}")
                if not measure or verdicts[key]:
                    replacement.train(child.training)
                    setattr(parent, child_name, replacement)
                    replaced.append(f"{parent_name}.{child_name}" if parent_name else child_name)
                    report.swapped[name] = report.swapped.get(name, 0) + 1
                break
    logger.info("%s", report)
    return report


# The replacements: the modules inside one are its own business, never offered to another optimization.
_REPLACEMENTS = (PackedExperts, PackedIntermediate, PackedLinear, PackedResidualOutput)
# Timed rounds per decision made in context, each with ``_CALLS_PER_ROUND`` calls of the stack with and without.
_CONTEXT_ROUNDS = 5
_CALLS_PER_ROUND = 2
# The same for a module timed alone, which is cheaper to call.
_ALONE_ROUNDS = 9
_CALLS_ALONE = 3


def _layer_stacks(model: nn.Module) -> list[nn.ModuleList]:
    """The model's lists of layers of one class (an encoder's ``layer``), where the decisions are made in context."""
    return [
        module
        for module in model.modules()
        if isinstance(module, nn.ModuleList) and len(module) and len({type(layer) for layer in module}) == 1
    ]


def _offered(root: nn.Module):
    """``(parent, name, child)`` for every module under ``root`` that an optimization may replace: not one inside a
    replacement."""
    for name, child in root.named_children():
        yield root, name, child
        if not isinstance(child, _REPLACEMENTS):
            yield from _offered(child)


def _decide_in_context(
    stack: nn.ModuleList, names: tuple[str, ...], tokens: int, report: OptimizationReport, verdicts: dict
) -> None:
    """The verdicts of the optimizations (in registry order) for the modules of one stack of layers, each measured on a
    copy of the whole stack: the stack as decided so far, against the same with every module of that optimization
    and shape swapped, interleaved.

    Why in context: a module timed alone keeps its weights in the cache between its repeated calls, where in a model
    the other layers' weights have evicted them; alone, the plain ``F.linear`` (which re-lays its weight out on every
    call) then looked as fast as the packed copy, and all-MiniLM-L6-v2 on the swaps chosen module by module ran up to
    15% slower than with every swap in (``benchmarks/bench_eager_layer_paths.py``, ``compact-bert`` against
    ``every-swap``). Stacks whose layers cannot run on hidden states alone (``layer(hidden_states)``) are left to the
    module-by-module measurement."""
    trial = copy.deepcopy(stack).eval()
    first = next((module for module in trial.modules() if isinstance(module, nn.Linear)), None)
    if first is None:
        return
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(1, tokens, first.in_features, generator=generator).to(first.weight.device, first.weight.dtype)

    def run() -> None:
        hidden_states = inputs
        for layer in trial:
            output = layer(hidden_states)
            hidden_states = output[0] if isinstance(output, tuple) else output

    with torch.inference_mode():
        try:
            run()
        except (TypeError, RuntimeError, ValueError, IndexError):
            return
        claimed: set[int] = set()  # a module an earlier optimization accepted is not offered to a later one
        for name in names:
            groups: dict[tuple, list] = {}
            for parent, child_name, child in list(_offered(trial)):
                if id(child) in claimed:
                    continue
                replacement = INFERENCE_OPTIMIZATIONS[name](child)
                if replacement is not None:
                    claimed.add(id(child))
                    replacement.eval()
                    groups.setdefault((name, _shape_key(child)), []).append((parent, child_name, child, replacement))
            for key, members in groups.items():
                if key not in verdicts:
                    verdicts[key] = _faster_in_context(run, members, report, f"{name} {key[1]} in context")
                for parent, child_name, child, replacement in members:
                    setattr(parent, child_name, replacement if verdicts[key] else child)


def _faster_in_context(run: Callable[[], None], members: list, report: OptimizationReport, label: str) -> bool:
    """Whether ``run`` is faster with every member's replacement in than with none."""

    def run_with(replacements: bool) -> None:
        for parent, child_name, child, replacement in members:
            setattr(parent, child_name, replacement if replacements else child)
        run()

    return _replacement_pays(run_with, _CONTEXT_ROUNDS, _CALLS_PER_ROUND, report, label)


def _shape_key(module: nn.Module) -> tuple:
    """What the speed of a module's packed form depends on: its class and its parameters' shapes."""
    return (type(module).__name__, *(tuple(p.shape) for p in module.parameters(recurse=True)))


def _pays(original: nn.Module, replacement: nn.Module, tokens: int, report: OptimizationReport, label: str) -> bool:
    """Whether ``replacement`` runs faster than ``original`` on ``tokens`` random rows here (both in eval mode, as at
    inference)."""
    inputs = _sample_inputs(original, tokens)
    if inputs is None:
        return False
    was_training = original.training
    original.eval()
    replacement.eval()
    with torch.inference_mode():
        pays = _replacement_pays(
            lambda packed: (replacement if packed else original)(*inputs), _ALONE_ROUNDS, _CALLS_ALONE, report, label
        )
    original.train(was_training)
    return pays


def _replacement_pays(
    run: Callable[[bool], None], rounds: int, calls: int, report: OptimizationReport, label: str
) -> bool:
    """Whether ``run(True)`` (the replacements in) is faster than ``run(False)``: the medians of ``rounds``
    interleaved rounds of ``calls`` calls each, after one call of each (the first packed call packs). Records the
    ratio in ``report.measured[label]``, both the module-by-module and the in-context measurements."""
    times: dict[bool, list[float]] = {False: [], True: []}
    for packed in (False, True):
        run(packed)
    for _ in range(rounds):
        for packed in (False, True):
            start = time.perf_counter()
            for _ in range(calls):
                run(packed)
            times[packed].append(time.perf_counter() - start)
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    report.measured[label] = round(ratio, 3)
    return ratio < 1.0


def _sample_inputs(module: nn.Module, tokens: int) -> tuple | None:
    """Random inputs of the module's forward for ``tokens`` rows, in its parameters' dtype and device."""
    generator = torch.Generator().manual_seed(0)
    parameter = next(module.parameters())

    def rows(width: int) -> torch.Tensor:
        return torch.randn(tokens, width, generator=generator).to(parameter.device, parameter.dtype)

    if isinstance(module, nn.Linear):
        return (rows(module.in_features),)
    if hasattr(module, "up_proj"):
        index = torch.randint(0, module.num_experts, (tokens, 1), generator=generator).to(parameter.device)
        return rows(module.up_proj.shape[-1]), index, torch.ones(tokens, 1, dtype=parameter.dtype)
    dense = getattr(module, "dense", None)
    if not isinstance(dense, nn.Linear):
        return None
    if isinstance(module, (*_INTERMEDIATES, *family_classes("Intermediate"))):
        return (rows(dense.in_features),)
    return rows(dense.in_features), rows(dense.out_features)


def packed_weight_bytes(model: nn.Module) -> int:
    """Bytes held by the packed copies of ``model``'s swapped modules (their logical size; oneDNN may pad)."""
    total = 0
    for module in model.modules():
        for value in (*vars(module).values(), *vars(module).get("_onednn_packed", ())):
            if isinstance(value, PackedMatrices):
                total += value.nbytes
    return total
