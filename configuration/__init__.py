"""Configs of the four compact-bert families and their named paper-size presets.

The config classes are those of the generated ``models/<model_type>/configuration_<model_type>.py`` (the modular
sources here, ``modular_*.py`` and ``sparse_bert_base.py``, are what those files are generated from, and are read by
the generator only), so a config built here is the class a saved folder ships and a ``trust_remote_code`` load
builds.
"""

from __future__ import annotations

from transformers import BertConfig

from ..models.compact_mobilebert.configuration_compact_mobilebert import CompactMobileBertConfig
from ..models.ib_bert.configuration_ib_bert import IBBertConfig
from ..models.minimoe.configuration_minimoe import MiniMoEConfig
from ..models.moe_bert.configuration_moe_bert import MoEBertConfig
from .dense_students import dense_student_config, is_dense
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

# Preset name → (config class, fields); the dense presets are transformers' BERT (``dense_students``).
PRESETS = {
    name: (BertConfig if model_type == "bert" else CONFIG_CLASSES[model_type], fields)
    for name, (model_type, fields) in PRESET_FIELDS.items()
}


def preset_config(name: str, teacher_config=None, **overrides):
    """Build the config of a named paper-size preset; ``overrides`` replace any of its fields, and a name that is
    no field of the preset's config is refused (``validation.reject_unknown_fields``).

    A dense student — a MiniLM preset, or a MiniMoE preset given one expert in its FFN and attention — is the
    teacher's own architecture (``teacher_config``'s class with its vocabulary, positions and activation; BERT
    without one): ``dense_students.dense_student_config``."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}.")
    config_class, fields = PRESETS[name]
    if config_class is BertConfig:
        return dense_student_config({**fields, **overrides}, teacher_config)
    reject_unknown_fields(config_class, overrides)
    config = config_class(**{**fields, **overrides})
    if config_class is MiniMoEConfig and is_dense(config):
        return dense_student_config(_dense_fields(config_class, {**fields, **overrides}), teacher_config)
    return config


def _dense_fields(config_class, fields: dict) -> dict:
    """A MiniMoE preset's fields once it has one expert everywhere: the BERT ones. A field that only experts read,
    set to anything but its default, is refused rather than dropped in silence."""
    defaults = config_class().to_dict()
    bert_fields = set(BertConfig().to_dict())
    expert_only = {"num_experts", "num_attention_experts"}
    for key, value in fields.items():
        if key not in bert_fields and key not in expert_only and value != defaults.get(key):
            raise ValueError(
                f"`{key}` applies to mixture-of-experts blocks, and this student has one expert in its FFN and its "
                f"attention: it is a plain BERT (num_experts 1, num_attention_experts 1). Leave `{key}` out, or give "
                "num_experts > 1."
            )
    return {key: value for key, value in fields.items() if key in bert_fields}
