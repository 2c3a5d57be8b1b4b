"""Exported graphs compute MoE experts in a form their runtime runs well; the model's own modules are untouched.

Why not the model file's own forward: on transformers 5 its experts dispatch to the experts interface (a grouped
GEMM that export cannot lower), and its loop reads each expert's matrix out of the ``[E, out, in]`` stack, which an
exporter writes as a ``Gather`` copying the matrix on every run, in front of a ``Gemm`` that int8 quantization
leaves alone. The forms here:

- **routed** (ONNX, up to ``ROUTED_EXPERTS_MAX`` experts): the per-expert loop, each expert selecting its tokens
  (``NonZero``: data-dependent sizes, which ONNX Runtime runs natively) and multiplying them by its own constant
  ``[in, out]`` matrix with a plain ``MatMul``, so the cost follows the tokens each expert receives, like the eager
  loop's, and ``quantize_dynamic`` turns every expert product into an int8 one;
- **static** (LiteRT, whose converter needs static shapes; and ONNX above ``ROUTED_EXPERTS_MAX``, where one unrolled
  subgraph per expert and block would take minutes to export: 768 for moe-bert-small). Every token runs through its
  own expert's weights with one batched product per projection and no data-dependent shape:

  - up to ``ALL_EXPERTS_MAX`` experts, every token runs through every expert and keeps its own expert's result: the
    experts' ``[E, out, in]`` matrices act as one ``[E * out, in]`` matrix, a plain 2-D ``MatMul`` with a constant
    weight, which int8 quantization (per output channel) handles. Per token this costs E x the FFN's multiply-adds;
  - above it, each token gathers its own expert's matrices: memory-bound (8 d f bytes at fp32 per token), not shared
    between tokens of one expert. At this CPU's order of 50 GFLOP/s against 10 GB/s the two break even near E = 10.

- **capacity** (LiteRT, for an MoE FFN whose router has an ``eval_capacity_factor``: ``export tflite
  --capacity_factor``): each expert runs a fixed number of slots, ``ceil(factor · T / E)`` for ``T`` tokens in the
  graph, filled with its first tokens (``TopK`` over the positions: static shapes), through its own constant
  matrices. The router keeps at most ``ceil(factor · real tokens / E)`` tokens per expert and drops the rest (weight
  0; Switch Transformers' capacity, the model's own ``eval_capacity_factor`` semantics), so every kept token has a
  slot: the form computes exactly what the eager model with that factor computes, at ``factor`` × the FFN's
  multiply-adds instead of ``E`` ×.

Tokens the eager layer leaves out (padding, tokens over capacity) have routing weight 0 and get zeros, as in eager
mode. ``export_expert_form(model, routed=...)`` swaps these modules in for the duration of an export, recognising
the expert modules by their parameters (so a model loaded as Hub remote code is handled too), and swaps the model's
own back afterwards: eager training and inference numerics are untouched.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import nn

__all__ = [
    "ALL_EXPERTS_MAX",
    "ROUTED_EXPERTS_MAX",
    "CapacityExperts",
    "RoutedExpertLinear",
    "RoutedExperts",
    "StaticExpertLinear",
    "StaticExperts",
    "export_expert_form",
]

ALL_EXPERTS_MAX = 8
ROUTED_EXPERTS_MAX = 16


def _static_linear(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """``rows[t] @ weight[expert[t]].T + bias[expert[t]]`` for every token ``t`` (module docstring)."""
    num_experts, out_features, in_features = weight.shape
    if num_experts > ALL_EXPERTS_MAX:
        return torch.matmul(rows.unsqueeze(1), weight[expert].transpose(1, 2)).squeeze(1) + bias[expert]
    every = torch.matmul(rows, weight.reshape(num_experts * out_features, in_features).t()) + bias.reshape(-1)
    index = expert.view(-1, 1, 1).expand(rows.shape[0], 1, out_features)
    return every.view(rows.shape[0], num_experts, out_features).gather(1, index).squeeze(1)


class StaticExperts(nn.Module):
    """An MoE FFN's experts (``up_proj`` / ``down_proj`` stacks, same parameter objects) in the static form."""

    def __init__(self, experts: nn.Module):
        super().__init__()
        self.num_experts = experts.num_experts
        self.up_proj, self.up_proj_bias = experts.up_proj, experts.up_proj_bias
        self.down_proj, self.down_proj_bias = experts.down_proj, experts.down_proj_bias
        self.act_fn = experts.act_fn

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        expert = top_k_index.reshape(-1)
        hidden = self.act_fn(_static_linear(hidden_states, self.up_proj, self.up_proj_bias, expert))
        outputs = _static_linear(hidden, self.down_proj, self.down_proj_bias, expert)
        return outputs * top_k_weights.reshape(-1, 1).to(outputs.dtype)


class StaticExpertLinear(nn.Module):
    """An MoE-attention projection (stacked ``[E, out, in]`` weight, same parameters) in the static form; called as the
    model's ``…ExpertLinear`` (each token scaled by its ``top_k_weights``, the leading shape kept)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.num_experts = layer.num_experts
        self.weight, self.bias = layer.weight, layer.bias

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        rows = hidden_states.reshape(-1, hidden_states.shape[-1])
        outputs = _static_linear(rows, self.weight, self.bias, top_k_index.reshape(-1))
        outputs = outputs * top_k_weights.reshape(-1, 1).to(outputs.dtype)
        return outputs.view(*hidden_states.shape[:-1], -1)


def _expert_matrices(stack: torch.Tensor) -> list[torch.Tensor]:
    """Each expert's ``[out, in]`` matrix of an ``[E, out, in]`` stack as its own constant ``[in, out]`` tensor: an
    exported ``MatMul`` then reads an initializer, not a ``Gather`` of the stack."""
    return [matrix.t().contiguous() for matrix in stack.detach().unbind(0)]


def _hold_expert_matrices(module: nn.Module, experts: nn.Module) -> None:
    """``module`` holds each expert's up / down matrix as its own constant (``up_proj_<e>``, ``down_proj_<e>``, from
    ``_expert_matrices``) and the bias stacks (``up_proj_bias``, ``down_proj_bias``), as non-persistent buffers."""
    for name in ("up_proj", "down_proj"):
        for expert, matrix in enumerate(_expert_matrices(getattr(experts, name))):
            module.register_buffer(f"{name}_{expert}", matrix, persistent=False)
        module.register_buffer(f"{name}_bias", getattr(experts, f"{name}_bias").detach(), persistent=False)


def _routed_rows(expert_index: torch.Tensor, weight: torch.Tensor, num_experts: int) -> list[torch.Tensor]:
    """Per expert, the positions of the tokens it runs: its own, of routing weight not 0."""
    target = torch.where(weight != 0, expert_index, num_experts)
    return [(target == expert).nonzero().squeeze(-1) for expert in range(num_experts)]


class RoutedExperts(nn.Module):
    """An MoE FFN's experts in the routed form: per expert, its tokens through its own constant matrices."""

    def __init__(self, experts: nn.Module):
        super().__init__()
        self.num_experts = experts.num_experts
        self.act_fn = experts.act_fn
        _hold_expert_matrices(self, experts)

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        weight = top_k_weights.reshape(-1)
        outputs = torch.zeros_like(hidden_states)
        for expert, rows in enumerate(_routed_rows(top_k_index.reshape(-1), weight, self.num_experts)):
            up, down = getattr(self, f"up_proj_{expert}"), getattr(self, f"down_proj_{expert}")
            inner = self.act_fn(hidden_states.index_select(0, rows) @ up + self.up_proj_bias[expert])
            result = (inner @ down + self.down_proj_bias[expert]) * weight.index_select(0, rows).unsqueeze(-1)
            outputs = outputs.index_add(0, rows, result.to(outputs.dtype))
        return outputs


class CapacityExperts(nn.Module):
    """An MoE FFN's experts in the capacity form (module docstring): static slots per expert, constant matrices."""

    def __init__(self, experts: nn.Module, capacity_factor: float):
        super().__init__()
        self.num_experts = experts.num_experts
        self.capacity_factor = capacity_factor
        self.act_fn = experts.act_fn
        _hold_expert_matrices(self, experts)

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        tokens = hidden_states.shape[0]
        slots = min(tokens, math.ceil(self.capacity_factor * tokens / self.num_experts))
        weight = top_k_weights.reshape(-1)
        target = torch.where(weight != 0, top_k_index.reshape(-1), self.num_experts)
        # Earlier positions score higher, so TopK picks each expert's first tokens (all of them: at most `slots`).
        earliness = torch.arange(tokens, 0, -1, device=hidden_states.device, dtype=hidden_states.dtype)
        outputs = torch.zeros_like(hidden_states)
        for expert in range(self.num_experts):
            mine = (target == expert).to(hidden_states.dtype)
            _, rows = torch.topk(mine * earliness, slots)
            up, down = getattr(self, f"up_proj_{expert}"), getattr(self, f"down_proj_{expert}")
            inner = self.act_fn(hidden_states.index_select(0, rows) @ up + self.up_proj_bias[expert])
            scale = weight.index_select(0, rows) * mine.index_select(0, rows)  # 0 for a slot left empty
            result = (inner @ down + self.down_proj_bias[expert]) * scale.unsqueeze(-1).to(inner.dtype)
            # Scattered back by a one-hot product ([tokens, slots] x [slots, hidden]): static for any converter.
            placement = (rows.unsqueeze(0) == torch.arange(tokens, device=rows.device).unsqueeze(1)).to(inner.dtype)
            outputs = outputs + placement @ result
        return outputs


class RoutedExpertLinear(nn.Module):
    """An MoE-attention projection in the routed form (each token scaled by its weight: 0 gives zeros, as in eager
    mode)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.num_experts = layer.num_experts
        self.out_features = layer.weight.shape[1]
        for expert, matrix in enumerate(_expert_matrices(layer.weight)):
            self.register_buffer(f"weight_{expert}", matrix, persistent=False)
        self.register_buffer("bias", layer.bias.detach(), persistent=False)

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        rows_in = hidden_states.reshape(-1, hidden_states.shape[-1])
        outputs = rows_in.new_zeros(rows_in.shape[0], self.out_features)
        weight = top_k_weights.reshape(-1).to(rows_in.dtype)
        for expert, rows in enumerate(_routed_rows(top_k_index.reshape(-1), weight, self.num_experts)):
            result = rows_in.index_select(0, rows) @ getattr(self, f"weight_{expert}") + self.bias[expert]
            outputs = outputs.index_add(0, rows, result * weight.index_select(0, rows).unsqueeze(-1))
        return outputs.view(*hidden_states.shape[:-1], self.out_features)


def _export_form(module: nn.Module, routed: bool, capacity_factor: float | None) -> nn.Module | None:
    stack = getattr(module, "up_proj", None)
    weight = getattr(module, "weight", None)
    if isinstance(stack, nn.Parameter) and stack.dim() == 3:
        if routed and stack.shape[0] <= ROUTED_EXPERTS_MAX:
            return RoutedExperts(module)
        if capacity_factor is None or routed:
            return StaticExperts(module)
        return CapacityExperts(module, capacity_factor)
    if not isinstance(module, nn.Linear) and isinstance(weight, nn.Parameter) and weight.dim() == 3:
        if routed and weight.shape[0] <= ROUTED_EXPERTS_MAX:
            return RoutedExpertLinear(module)
        return StaticExpertLinear(module)
    return None


@contextlib.contextmanager
def export_expert_form(model: nn.Module, routed: bool) -> Iterator[int]:
    """Within the block, every expert module of ``model`` computes in its export form (module docstring): routed
    where the runtime takes data-dependent shapes (``routed=True``: ONNX) and the expert count allows; otherwise
    capacity where the block's router has an ``eval_capacity_factor``, else static. Yields how many modules were
    swapped. The model's own modules are put back on exit, also after an error."""
    swapped = []
    for parent in list(model.modules()):
        capacity_factor = getattr(getattr(parent, "router", None), "eval_capacity_factor", None)
        for name, child in list(parent.named_children()):
            replacement = _export_form(child, routed, capacity_factor)
            if replacement is not None:
                swapped.append((parent, name, child))
                setattr(parent, name, replacement.train(child.training))
    try:
        yield len(swapped)
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)
