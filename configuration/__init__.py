"""Configs of the four compact-bert families and their named paper-size presets.

The config classes are those of the generated ``models/<model_type>/configuration_<model_type>.py`` (the modular
sources here, ``modular_*.py`` and ``sparse_bert_base.py``, are what those files are generated from, and are read by
the generator only), so a config built here is the class a saved folder ships and a ``trust_remote_code`` load
builds.
"""

from __future__ import annotations

from ..models.compact_mobilebert.configuration_compact_mobilebert import CompactMobileBertConfig
from ..models.ib_bert.configuration_ib_bert import IBBertConfig
from ..models.minimoe.configuration_minimoe import MiniMoEConfig
from ..models.moe_bert.configuration_moe_bert import MoEBertConfig
from .presets import PRESET_FIELDS
from .validation import reject_unknown_fields

__all__ = [
    "CONFIG_CLASSES",
    "CompactMobileBertConfig",
    "IBBertConfig",
    "MiniMoEConfig",
    "MoEBertConfig",
    "PRESETS",
    "preset_config",
]

# model_type → config class, one per family.
CONFIG_CLASSES = {
    config_class.model_type: config_class
    for config_class in (IBBertConfig, CompactMobileBertConfig, MiniMoEConfig, MoEBertConfig)
}

# Preset name → (config class, fields).
PRESETS = {name: (CONFIG_CLASSES[model_type], fields) for name, (model_type, fields) in PRESET_FIELDS.items()}


def preset_config(name: str, **overrides):
    """Build the config of a named paper-size preset; ``overrides`` replace any of its fields, and a name that is
    no field of the preset's config is refused (``validation.reject_unknown_fields``)."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}.")
    config_class, fields = PRESETS[name]
    reject_unknown_fields(config_class, overrides)
    return config_class(**{**fields, **overrides})
