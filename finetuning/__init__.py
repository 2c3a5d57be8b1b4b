"""Fine-tuning of compact-bert models (and any BERT-like transformers model) on classification, regression and
NER: data loading (``data``), training arguments (``finetune_config``), the trainer (``finetune_trainer``) and
PEFT adapters (``peft_support``); the job is ``jobs/finetune.py``, its command ``compact-bert finetune``.

``peft_registration`` needs nothing but the standard library (``import compact_bert`` runs it);
``peft_support`` imports PEFT, so its names are loaded on first use.
"""

from __future__ import annotations

from .peft_registration import COMPACT_BERT_MODEL_TYPES, register_peft_default_targets

__all__ = [
    "COMPACT_BERT_MODEL_TYPES",
    "PEFT_METHODS",
    "adaptable_linear_module_names",
    "build_peft_config",
    "register_peft_default_targets",
    "router_module_names",
]

_FROM_PEFT_SUPPORT = ("PEFT_METHODS", "adaptable_linear_module_names", "build_peft_config", "router_module_names")


def __getattr__(name: str):
    if name in _FROM_PEFT_SUPPORT:
        from . import peft_support

        return getattr(peft_support, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
