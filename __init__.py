"""compact-bert: compact and mixture-of-experts BERT models as first-class transformers models.

Importing the package registers every config and model with transformers' Auto classes, so
``AutoConfig.for_model("minimoe")`` or ``AutoModelForMaskedLM.from_pretrained(dir)`` just work.
"""

from __future__ import annotations

import transformers

from .configuration import (
    PRESETS,
    CompactMobileBertConfig,
    IBBertConfig,
    MiniMoEConfig,
    MoEBertConfig,
    preset_config,
)
from .export.optimum_import_hook import register_when_optimum_is_imported
from .finetuning.peft_registration import register_when_peft_is_imported
from .modeling import (
    AUTO_CLASSES_BY_CONFIG,
    CompactMobileBertForMaskedLM,
    CompactMobileBertForPreTraining,
    CompactMobileBertForQuestionAnswering,
    CompactMobileBertForSequenceClassification,
    CompactMobileBertForTokenClassification,
    CompactMobileBertModel,
    CompactMobileBertPreTrainedModel,
    IBBertForMaskedLM,
    IBBertForPreTraining,
    IBBertForQuestionAnswering,
    IBBertForSequenceClassification,
    IBBertForTokenClassification,
    IBBertModel,
    IBBertPreTrainedModel,
    MiniMoEForMaskedLM,
    MiniMoEForQuestionAnswering,
    MiniMoEForSequenceClassification,
    MiniMoEForTokenClassification,
    MiniMoEModel,
    MiniMoEPreTrainedModel,
    MoEBertForMaskedLM,
    MoEBertForQuestionAnswering,
    MoEBertForSequenceClassification,
    MoEBertForTokenClassification,
    MoEBertModel,
    MoEBertPreTrainedModel,
)
from .optimization import optimize_for_inference

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "CompactMobileBertConfig",
    "IBBertConfig",
    "MiniMoEConfig",
    "MoEBertConfig",
    "preset_config",
    "CompactMobileBertForMaskedLM",
    "CompactMobileBertForPreTraining",
    "CompactMobileBertForQuestionAnswering",
    "CompactMobileBertForSequenceClassification",
    "CompactMobileBertForTokenClassification",
    "CompactMobileBertModel",
    "CompactMobileBertPreTrainedModel",
    "IBBertForMaskedLM",
    "IBBertForPreTraining",
    "IBBertForQuestionAnswering",
    "IBBertForSequenceClassification",
    "IBBertForTokenClassification",
    "IBBertModel",
    "IBBertPreTrainedModel",
    "MiniMoEForMaskedLM",
    "MiniMoEForQuestionAnswering",
    "MiniMoEForSequenceClassification",
    "MiniMoEForTokenClassification",
    "MiniMoEModel",
    "MiniMoEPreTrainedModel",
    "MoEBertForMaskedLM",
    "MoEBertForQuestionAnswering",
    "MoEBertForSequenceClassification",
    "MoEBertForTokenClassification",
    "MoEBertModel",
    "MoEBertPreTrainedModel",
    "optimize_for_inference",
]


def _register_auto_classes() -> None:
    """Map each model type to its classes in transformers' Auto classes, and register each class for its Auto class
    (``register_for_auto_class``), so that transformers' ``save_pretrained`` / ``push_to_hub`` copy the generated
    code files next to the weights and write ``auto_map``."""
    for config_class, auto_classes in AUTO_CLASSES_BY_CONFIG.items():
        transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        config_class.register_for_auto_class("AutoConfig")
        for auto_name, model_class in auto_classes.items():
            getattr(transformers, auto_name).register(config_class, model_class, exist_ok=True)
            model_class.register_for_auto_class(auto_name)


_register_auto_classes()
# PEFT's default targets for our model types (query/value for LoRA, ...), without importing PEFT here.
register_when_peft_is_imported()
# Optimum's ONNX configs for our model types, without importing Optimum here.
register_when_optimum_is_imported()
