"""The static, batched form of the expert computation, for exported graphs: ``moe_implementation="batched"``.

Why: the dispatch of the other implementations (``moe_implementations``) runs a loop over experts; under export that
loop is unrolled into one subgraph per expert and block (768 for moe-bert-small: minutes of export time), and a
skip-empty-expert branch would be frozen by a tracing exporter. Here every token instead gathers *its own* expert's
weights and runs one batched matrix product per projection: one small subgraph per block, any routing, nothing
frozen, and every expert's weights stay in the graph (they are gathered by the routed index at run time). The cost
is memory traffic: each token reads its expert's matrices, which is what a per-expert loop reads too for a single
token but is not amortised across tokens of the same expert.

Tokens the eager layer leaves out (padding, and tokens over capacity when ``eval_capacity_factor`` is set) get
zeros, as in eager mode: the form reads the same dispatch target. The exporters select it for the duration of an
export (``export.moe_export_form.batched_expert_form``); as a registered implementation it ships in the Hub remote
code too, so a folder loaded with ``trust_remote_code=True`` exports the same way.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ALL_EXPERTS_MAX", "BatchedExperts"]


def _gathered_linear(
    rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, expert: torch.Tensor
) -> torch.Tensor:
    """``rows[t] @ weight[expert[t]].T + bias[expert[t]]`` for every token ``t`` with one batched product."""
    return torch.matmul(rows.unsqueeze(1), weight[expert].transpose(1, 2)).squeeze(1) + bias[expert]


# Up to this many experts, every token runs through every expert and keeps its own expert's result; above it, each
# token gathers its own expert's matrices. Per token, the first costs E x the FFN's multiply-adds, compute-bound
# (E x 4 d f flops); the second reads one expert's matrices, memory-bound (8 d f bytes at fp32) and not shared
# with other tokens. At this CPU's order of 50 GFLOP/s against 10 GB/s the two break even near E = 10. On the main
# job's MiniMoE 4L;192H (4 experts), batch 1 x 128, the all-experts form runs through onnxruntime at about eager
# PyTorch's latency (see README, Shipping).
ALL_EXPERTS_MAX = 8


def _all_experts_linear(
    rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, expert: torch.Tensor
) -> torch.Tensor:
    """``rows[t] @ weight[expert[t]].T + bias[expert[t]]`` by computing every expert on every row and keeping each
    row's own expert. The experts' ``[E, out, in]`` matrices act as one ``[E * out, in]`` matrix, so the graph has
    a plain 2-D ``MatMul`` with a constant weight: what int8 quantization (per output channel) handles."""
    num_experts, out_features, in_features = weight.shape
    every = torch.matmul(rows, weight.reshape(num_experts * out_features, in_features).t()) + bias.reshape(-1)
    return _pick(every.view(rows.shape[0], num_experts, out_features), expert)


def _pick(every: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """``every[t, expert[t]]`` for ``every`` of shape ``[T, E, out]``."""
    index = expert.view(-1, 1, 1).expand(every.shape[0], 1, every.shape[2])
    return every.gather(1, index).squeeze(1)


def _expert_and_keep(dispatch, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's expert (clamped to a valid index) and whether the eager layer would run it at all."""
    target = dispatch.target
    keep = target < num_experts
    return target.clamp(max=num_experts - 1), keep


def _batched_ffn(experts: nn.Module, inputs: torch.Tensor, dispatch) -> torch.Tensor:
    """``MoEExperts.forward`` in batched form: ``fc2(act(fc1(x)))`` with each token's own expert."""
    expert, keep = _expert_and_keep(dispatch, experts.num_experts)
    if experts.num_experts <= ALL_EXPERTS_MAX:
        hidden = experts.act(_all_experts_linear(inputs, experts.fc1_weight, experts.fc1_bias, expert))
        outputs = _all_experts_linear(hidden, experts.fc2_weight, experts.fc2_bias, expert)
    else:
        hidden = experts.act(_gathered_linear(inputs, experts.fc1_weight, experts.fc1_bias, expert))
        outputs = _gathered_linear(hidden, experts.fc2_weight, experts.fc2_bias, expert)
    return outputs * keep.unsqueeze(-1).to(outputs.dtype)


def _batched_linear(layer: nn.Module, inputs: torch.Tensor, dispatch) -> torch.Tensor:
    """``ExpertLinear.forward`` in batched form."""
    expert, keep = _expert_and_keep(dispatch, layer.num_experts)
    linear = _all_experts_linear if layer.num_experts <= ALL_EXPERTS_MAX else _gathered_linear
    outputs = linear(inputs, layer.weight, layer.bias, expert)
    return outputs * keep.unsqueeze(-1).to(outputs.dtype)


class BatchedExperts:
    """``moe_implementation="batched"``: each token through its own expert's weights, one batched product per
    projection (module docstring). Correct at any time; the form for export."""

    def linear(self, module: nn.Module, inputs: torch.Tensor, dispatch) -> torch.Tensor:
        return _batched_linear(module, inputs, dispatch)

    def ffn(self, module: nn.Module, inputs: torch.Tensor, dispatch) -> torch.Tensor:
        return _batched_ffn(module, inputs, dispatch)
