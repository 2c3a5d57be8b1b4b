"""Exported graphs compute MoE experts in a static form: one small subgraph per block that stays right for any routing.

Why: the eager expert loop of the model files groups tokens by expert with data-dependent sizes; under export that
loop is unrolled into one subgraph per expert and block (768 for moe-bert-small: minutes of export time), and a
skip-empty-expert branch would be frozen by a tracing exporter. In the static form every token instead runs through
its own expert's weights with one batched product per projection, and every expert's weights stay in the graph:

- up to ``ALL_EXPERTS_MAX`` experts, every token runs through every expert and keeps its own expert's result: the
  experts' ``[E, out, in]`` matrices act as one ``[E * out, in]`` matrix, a plain 2-D ``MatMul`` with a constant
  weight, which int8 quantization (per output channel) handles. Per token this costs E x the FFN's multiply-adds,
  compute-bound;
- above it, each token gathers its own expert's matrices: memory-bound (8 d f bytes at fp32 per token), not shared
  between tokens of one expert. At this CPU's order of 50 GFLOP/s against 10 GB/s the two break even near E = 10.

Tokens the eager layer leaves out (padding, tokens over capacity) have routing weight 0 and get zeros, as in eager
mode. ``static_expert_form(model)`` swaps the static modules in for the duration of an export, recognising the
expert modules by their parameters (so a model loaded as Hub remote code is handled too), and swaps the model's own
back afterwards: eager training and inference numerics are untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

__all__ = ["ALL_EXPERTS_MAX", "StaticExpertLinear", "StaticExperts", "static_expert_form"]

ALL_EXPERTS_MAX = 8


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
    """An MoE-attention projection (stacked ``[E, out, in]`` weight, same parameters) in the static form."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.num_experts = layer.num_experts
        self.weight, self.bias = layer.weight, layer.bias

    def forward(self, hidden_states: torch.Tensor, routing) -> torch.Tensor:
        rows = hidden_states.reshape(-1, hidden_states.shape[-1])
        outputs = _static_linear(rows, self.weight, self.bias, routing.expert_index.reshape(-1))
        outputs = outputs * (routing.weight.reshape(-1, 1) != 0).to(outputs.dtype)
        return outputs.view(*hidden_states.shape[:-1], -1)


def _static_form(module: nn.Module) -> nn.Module | None:
    stack = getattr(module, "up_proj", None)
    if isinstance(stack, nn.Parameter) and stack.dim() == 3:
        return StaticExperts(module)
    weight = getattr(module, "weight", None)
    if not isinstance(module, nn.Linear) and isinstance(weight, nn.Parameter) and weight.dim() == 3:
        return StaticExpertLinear(module)
    return None


@contextlib.contextmanager
def static_expert_form(model: nn.Module) -> Iterator[int]:
    """Within the block, every expert module of ``model`` computes in the static form; yields how many that is. The
    model's own modules are put back on exit, also after an error."""
    swapped = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            replacement = _static_form(child)
            if replacement is not None:
                swapped.append((parent, name, child))
                setattr(parent, name, replacement.train(child.training))
    try:
        yield len(swapped)
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)
