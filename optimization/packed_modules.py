"""Inference modules on oneDNN-packed weights that replace a model's own, keeping its parameters and their names.

Each replacement holds the *same* parameter objects under the same names as the module it replaces, so the state
dict, ``save_pretrained`` and PEFT see the model unchanged, and an optimizer step or ``load_state_dict`` reaches the
packed copies (they are rebuilt when their weight changes, ``onednn_weights.PackedMatrices``). Wherever a packed copy
cannot give the plain module's semantics (training, autograd, tracing, autocast, another dtype or device:
``packing_applies``) a replacement computes exactly what the module it replaced computed.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .onednn_weights import FUSED_ACTIVATIONS, PackedMatrices, packed_linear, packed_linear_add, packing_applies

__all__ = ["PackedExperts", "PackedLinear", "PackedResidualOutput", "onednn_experts_forward"]

_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu}


class PackedLinear(nn.Module):
    """``nn.Linear`` on a packed weight, optionally with the following activation (``"gelu"``, ``"relu"``) in the
    GEMM's epilogue (the caller then drops the activation module it replaced)."""

    def __init__(self, linear: nn.Linear, activation: str | None = None):
        super().__init__()
        if activation is not None and activation not in FUSED_ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(FUSED_ACTIVATIONS)} or None, got {activation!r}.")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.activation = activation
        self._packed = PackedMatrices()

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, activation={self.activation}"

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if not packing_applies(self, self.weight):
            outputs = F.linear(hidden_states, self.weight, self.bias)
            return outputs if self.activation is None else _ACTIVATIONS[self.activation](outputs)
        rows = hidden_states.reshape(-1, self.in_features)
        outputs = packed_linear(rows, self._packed.current(self.weight)[0], self.bias, self.activation)
        return outputs.view(*hidden_states.shape[:-1], self.out_features)


class PackedResidualOutput(nn.Module):
    """``LayerNorm(dropout(dense(x)) + residual)`` — BERT's ``BertSelfOutput`` / ``BertOutput`` and every module of
    that form — with the residual add in the packed GEMM's epilogue (dropout is the identity at inference)."""

    def __init__(self, output: nn.Module):
        super().__init__()
        self.dense = output.dense
        self.LayerNorm = output.LayerNorm
        self.dropout = getattr(output, "dropout", None)
        self._packed = PackedMatrices()

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        weight = self.dense.weight
        if not packing_applies(self, weight):
            outputs = self.dense(hidden_states)
            if self.dropout is not None:
                outputs = self.dropout(outputs)
            return self.LayerNorm(outputs + input_tensor)
        rows = hidden_states.reshape(-1, hidden_states.shape[-1])
        others = input_tensor.reshape(rows.shape[0], -1)
        outputs = packed_linear_add(rows, others, self._packed.current(weight)[0], self.dense.bias)
        return self.LayerNorm(outputs.view(*hidden_states.shape[:-1], -1))


def _expert_slices(top_k_index: torch.Tensor, top_k_weights: torch.Tensor, num_experts: int):
    """The positions of the tokens an expert runs (weight not 0), sorted by expert, and each expert's count."""
    weight = top_k_weights.reshape(-1)
    target = torch.where(weight != 0, top_k_index.reshape(-1), num_experts)
    order = torch.argsort(target, stable=True)
    counts = torch.bincount(target, minlength=num_experts + 1).tolist()
    return order[: sum(counts[:num_experts])], counts[:num_experts], weight


def onednn_experts_forward(module: nn.Module, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
    """The experts interface's forward (``hidden_states [T, hidden]``, ``top_k_index`` / ``top_k_weights [T, 1]``)
    for BERT-style experts (``up_proj`` / ``down_proj`` stacks with biases, ``act_fn``): the loop over experts on
    matrices packed once, the activation in the first GEMM's epilogue where oneDNN computes it exactly. Elsewhere
    (``packing_applies``): the same loop with ``F.linear``."""
    order, counts, weight = _expert_slices(top_k_index, top_k_weights, module.num_experts)
    outputs = torch.zeros_like(hidden_states)
    if order.numel() == 0:
        return outputs
    packed = packing_applies(module, module.up_proj) and packing_applies(module, module.down_proj)
    cache = _packed_cache(module)
    activation = _fused_activation(module.act_fn)
    up, down = (cache[0].current(module.up_proj), cache[1].current(module.down_proj)) if packed else (None, None)
    up_bias, down_bias = module.up_proj_bias.unbind(0), module.down_proj_bias.unbind(0)
    results = []
    for expert, rows in enumerate(hidden_states.index_select(0, order).split(counts)):
        if not rows.shape[0]:
            continue
        if not packed:
            inner = module.act_fn(F.linear(rows, module.up_proj[expert], up_bias[expert]))
            results.append(F.linear(inner, module.down_proj[expert], down_bias[expert]))
            continue
        if activation is not None:
            inner = packed_linear(rows, up[expert], up_bias[expert], activation)
        else:
            inner = module.act_fn(packed_linear(rows, up[expert], up_bias[expert]))
        results.append(packed_linear(inner, down[expert], down_bias[expert]))
    weighted = torch.cat(results) * weight.index_select(0, order).unsqueeze(-1).to(hidden_states.dtype)
    return outputs.index_copy_(0, order, weighted)


def _packed_cache(module: nn.Module) -> tuple[PackedMatrices, PackedMatrices]:
    """The packed copies of ``module``'s two stacks, kept on the module (outside its state dict)."""
    cache = module.__dict__.get("_onednn_packed")
    if cache is None:
        cache = module.__dict__["_onednn_packed"] = (PackedMatrices(), PackedMatrices())
    return cache


def _fused_activation(activation: nn.Module) -> str | None:
    """oneDNN's epilogue name for ``activation`` where it computes the same function (exact GELU, ReLU)."""
    from transformers.activations import GELUActivation

    if isinstance(activation, nn.ReLU):
        return "relu"
    if isinstance(activation, GELUActivation) and activation.act is F.gelu:
        return "gelu"
    if isinstance(activation, nn.GELU) and activation.approximate == "none":
        return "gelu"
    return None


class PackedExperts(nn.Module):
    """A model's experts (``up_proj`` / ``down_proj`` stacks) computed by ``onednn_experts_forward``, under every
    transformers line; the replaced module's parameters and ``act_fn`` are kept."""

    def __init__(self, experts: nn.Module):
        super().__init__()
        self.num_experts = experts.num_experts
        self.up_proj, self.up_proj_bias = experts.up_proj, experts.up_proj_bias
        self.down_proj, self.down_proj_bias = experts.down_proj, experts.down_proj_bias
        self.act_fn = experts.act_fn

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        return onednn_experts_forward(self, hidden_states, top_k_index, top_k_weights)
