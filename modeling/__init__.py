"""Model families of compact-bert.

The classes are those of the generated ``models/<model_type>/modeling_<model_type>.py``: the architectures
``modeling_bottleneck_bert`` and ``modeling_sparse_bert`` written out under each family's names (``modular_<family>.py``
says which), so the model compact-bert builds is the code a saved folder ships and a ``trust_remote_code`` load runs.
The sources are read by the generator only, never imported at run time: one class per model in a process.
"""

from __future__ import annotations

import sys

from transformers import PreTrainedModel

from ..configuration.auto_map import family_auto_map
from ..models.compact_mobilebert.modeling_compact_mobilebert import (
    CompactMobileBertForMaskedLM,
    CompactMobileBertForPreTraining,
    CompactMobileBertForQuestionAnswering,
    CompactMobileBertForSequenceClassification,
    CompactMobileBertForTokenClassification,
    CompactMobileBertModel,
    CompactMobileBertPreTrainedModel,
)
from ..models.ib_bert.modeling_ib_bert import (
    IBBertForMaskedLM,
    IBBertForPreTraining,
    IBBertForQuestionAnswering,
    IBBertForSequenceClassification,
    IBBertForTokenClassification,
    IBBertModel,
    IBBertPreTrainedModel,
)
from ..models.minimoe.modeling_minimoe import (
    MiniMoEForMaskedLM,
    MiniMoEForQuestionAnswering,
    MiniMoEForSequenceClassification,
    MiniMoEForTokenClassification,
    MiniMoEModel,
    MiniMoEPreTrainedModel,
)
from ..models.moe_bert.modeling_moe_bert import (
    MoEBertForMaskedLM,
    MoEBertForQuestionAnswering,
    MoEBertForSequenceClassification,
    MoEBertForTokenClassification,
    MoEBertModel,
    MoEBertPreTrainedModel,
)

__all__ = [
    "AUTO_CLASSES_BY_CONFIG",
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
]


def _auto_classes(base_model: type[PreTrainedModel]) -> dict[str, type[PreTrainedModel]]:
    """Auto class name → model class of ``base_model``'s family, as its config's ``auto_map`` names them."""
    module = sys.modules[base_model.__module__]
    config_class = base_model.config_class
    auto_map = family_auto_map(config_class, config_class.auto_model_suffixes)
    return {
        auto: getattr(module, target.rpartition(".")[2]) for auto, target in auto_map.items() if auto != "AutoConfig"
    }


# Config class → (Auto class name → model class), per family: what importing compact_bert registers.
AUTO_CLASSES_BY_CONFIG = {
    base_model.config_class: _auto_classes(base_model)
    for base_model in (IBBertModel, CompactMobileBertModel, MiniMoEModel, MoEBertModel)
}
