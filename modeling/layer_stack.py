"""Running a stack of encoder layers and collecting the standard per-layer outputs, for every family."""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import nn

__all__ = ["LayerStackOutput", "run_layer_stack"]


class LayerStackOutput(NamedTuple):
    hidden_states: torch.Tensor
    all_hidden_states: tuple[torch.Tensor, ...] | None  # embeddings output, then every layer's output
    all_attentions: tuple[torch.Tensor, ...] | None
    layer_outputs: list  # what each layer returned (routing decisions live there for MoE layers)


def run_layer_stack(
    layers: nn.ModuleList,
    hidden_states: torch.Tensor,
    call_layer: Callable[[nn.Module, torch.Tensor], NamedTuple],
    output_hidden_states: bool,
    output_attentions: bool,
) -> LayerStackOutput:
    """``call_layer(layer, hidden_states)`` must return a NamedTuple with ``hidden_states`` and
    ``attention_probs`` fields."""
    all_hidden_states = (hidden_states,) if output_hidden_states else None
    all_attentions = () if output_attentions else None
    layer_outputs = []
    for layer in layers:
        layer_output = call_layer(layer, hidden_states)
        layer_outputs.append(layer_output)
        hidden_states = layer_output.hidden_states
        if output_hidden_states:
            all_hidden_states = all_hidden_states + (hidden_states,)
        if output_attentions:
            all_attentions = all_attentions + (layer_output.attention_probs,)
    return LayerStackOutput(hidden_states, all_hidden_states, all_attentions, layer_outputs)
