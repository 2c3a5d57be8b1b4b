"""The logged routing numbers of MoE models: how they are named, and how a reader finds them again.

Trainers log, per MoE block, the largest and smallest share of real tokens routed to one expert and the fraction
dropped by the capacity limit, as ``block<i>_<statistic>`` (``eval_block<i>_<statistic>`` when evaluating). The
console (``console_log``), the model card (``model_cards/folder_facts``) and the recipes read them back with
``ROUTING_KEY`` instead of each spelling the names again.
"""

from __future__ import annotations

import re

import torch

__all__ = ["ROUTING_KEY", "routing_statistics", "with_evaluation_router_stats"]

ROUTING_KEY = re.compile(
    r"^(?P<prefix>eval_)?block(?P<block>\d+)_(?P<statistic>max_expert_share|min_expert_share|dropped_fraction)$"
)


def routing_statistics(expert_load: torch.Tensor | None, dropped: torch.Tensor | None) -> dict[str, float]:
    """Per MoE block: max/min share of real tokens routed to one expert, and the dropped fraction."""
    if expert_load is None:
        return {}
    statistics = {}
    for block, load in enumerate(expert_load):
        statistics[f"block{block}_max_expert_share"] = float(load.max())
        statistics[f"block{block}_min_expert_share"] = float(load.min())
        statistics[f"block{block}_dropped_fraction"] = float(dropped[block])
    return statistics


def with_evaluation_router_stats(model, inputs: dict) -> dict:
    """``inputs`` asking an MoE model in eval mode for its balance loss and routing statistics, which its routers
    compute only in training unless asked (``output_router_stats``): evaluation logs them next to the training's."""
    config = model.config
    routes = max(getattr(config, "num_experts", 1), getattr(config, "num_attention_experts", 1)) > 1
    return {**inputs, "output_router_stats": True} if routes and not model.training else inputs
