"""MiniMoE: a MiniLM-shaped student with mixtures of minimal top-1 experts (paper 002 §3.2).

The architecture is ``modeling_sparse_bert``; these classes only name the family's config and weight
prefix.
"""

from __future__ import annotations

from ..configuration.configuration_minimoe import MiniMoEConfig
from .modeling_sparse_bert import (
    SparseBertForMaskedLM,
    SparseBertForQuestionAnswering,
    SparseBertForSequenceClassification,
    SparseBertForTokenClassification,
    SparseBertModel,
    SparseBertPreTrainedModel,
)

__all__ = [
    "AUTO_CLASSES",
    "MiniMoEForMaskedLM",
    "MiniMoEForQuestionAnswering",
    "MiniMoEForSequenceClassification",
    "MiniMoEForTokenClassification",
    "MiniMoEModel",
    "MiniMoEPreTrainedModel",
]


class MiniMoEPreTrainedModel(SparseBertPreTrainedModel):
    config_class = MiniMoEConfig
    base_model_prefix = "minimoe"


class MiniMoEModel(MiniMoEPreTrainedModel, SparseBertModel):
    """Base model; see ``SparseBertModel.forward`` for the arguments."""


class MiniMoEForMaskedLM(MiniMoEPreTrainedModel, SparseBertForMaskedLM):
    backbone_class = MiniMoEModel


class MiniMoEForSequenceClassification(MiniMoEPreTrainedModel, SparseBertForSequenceClassification):
    backbone_class = MiniMoEModel


class MiniMoEForTokenClassification(MiniMoEPreTrainedModel, SparseBertForTokenClassification):
    backbone_class = MiniMoEModel


class MiniMoEForQuestionAnswering(MiniMoEPreTrainedModel, SparseBertForQuestionAnswering):
    backbone_class = MiniMoEModel


# Auto class name → model class: what importing compact_bert registers and what ``auto_map`` records.
AUTO_CLASSES = {
    "AutoModel": MiniMoEModel,
    "AutoModelForMaskedLM": MiniMoEForMaskedLM,
    "AutoModelForSequenceClassification": MiniMoEForSequenceClassification,
    "AutoModelForTokenClassification": MiniMoEForTokenClassification,
    "AutoModelForQuestionAnswering": MiniMoEForQuestionAnswering,
}
