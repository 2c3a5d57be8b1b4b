"""Configs of the four compact-bert families and their named paper-size presets."""

from __future__ import annotations

from .configuration_bottleneck_bert import (
    BOTTLENECK_BERT_PRESETS,
    BottleneckBertConfig,
    CompactMobileBertConfig,
    IBBertConfig,
)
from .configuration_minimoe import MINIMOE_PRESETS, MiniMoEConfig
from .configuration_moe_bert import MOE_BERT_PRESETS, MoEBertConfig
from .sparse_bert_base import SparseBertConfigBase
from .validation import reject_unknown_fields

__all__ = [
    "BottleneckBertConfig",
    "CompactMobileBertConfig",
    "IBBertConfig",
    "MiniMoEConfig",
    "MoEBertConfig",
    "PRESETS",
    "SparseBertConfigBase",
    "preset_config",
]

PRESETS = {**BOTTLENECK_BERT_PRESETS, **MINIMOE_PRESETS, **MOE_BERT_PRESETS}


def preset_config(name: str, **overrides):
    """Build the config of a named paper-size preset; ``overrides`` replace any of its fields, and a name that is
    no field of the preset's config is refused (``validation.reject_unknown_fields``)."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}.")
    config_class, fields = PRESETS[name]
    reject_unknown_fields(config_class, overrides)
    return config_class(**{**fields, **overrides})
