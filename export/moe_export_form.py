"""Exported graphs compute MoE experts in the static, batched form (``moe_implementation="batched"``,
``modeling/batched_experts.py``): one small subgraph per block that stays correct for any routing.

``batched_expert_form(model)`` selects it on every compact-bert config among the model's modules (a sentence-embedding
wrapper holds its encoder's) for the duration of an export, so that eager training and inference numerics are
untouched; a folder loaded as Hub remote code carries the same implementation in its bundled modeling file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

__all__ = ["EXPERT_MODULE_NAMES", "batched_expert_form"]

# Class names of the stacked-expert modules of ``modeling/moe_layer.py`` (and of its remote-code copies).
EXPERT_MODULE_NAMES = ("MoEExperts", "ExpertLinear")


@contextlib.contextmanager
def batched_expert_form(model: nn.Module) -> Iterator[int]:
    """Within the block, every expert module of ``model`` computes in the batched export form; yields how many
    expert modules that is. Each config's own choice is restored on exit, also after an error."""
    configs = {}
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "moe_implementation"):
            configs[id(config)] = config
    previous = {key: config.moe_implementation for key, config in configs.items()}
    try:
        for config in configs.values():
            config.moe_implementation = "batched"
        yield sum(type(module).__name__ in EXPERT_MODULE_NAMES for module in model.modules())
    finally:
        for key, config in configs.items():
            config.moe_implementation = previous[key]
