"""MoE-BERT: BERT with every FFN a 64-expert top-1 MoE (paper 003 §2.2); one expert = its vanilla teacher.

The modular source of ``models/moe_bert/modeling_moe_bert.py`` (``python -m utils.hub_code``), which defines the
classes compact-bert runs. The architecture is ``modeling_sparse_bert``; these classes only name the family's config and weight
prefix.
"""

from __future__ import annotations

from ..configuration.modular_moe_bert import MoEBertConfig
from .modeling_sparse_bert import (
    SparseBertForMaskedLM,
    SparseBertForQuestionAnswering,
    SparseBertForSequenceClassification,
    SparseBertForTokenClassification,
    SparseBertModel,
    SparseBertPreTrainedModel,
)

__all__ = [
    "MoEBertForMaskedLM",
    "MoEBertForQuestionAnswering",
    "MoEBertForSequenceClassification",
    "MoEBertForTokenClassification",
    "MoEBertModel",
    "MoEBertPreTrainedModel",
]


class MoEBertPreTrainedModel(SparseBertPreTrainedModel):
    config_class = MoEBertConfig
    base_model_prefix = "moe_bert"


class MoEBertModel(MoEBertPreTrainedModel, SparseBertModel):
    """Base model; see ``SparseBertModel.forward`` for the arguments."""


class MoEBertForMaskedLM(MoEBertPreTrainedModel, SparseBertForMaskedLM):
    backbone_class = MoEBertModel


class MoEBertForSequenceClassification(MoEBertPreTrainedModel, SparseBertForSequenceClassification):
    backbone_class = MoEBertModel


class MoEBertForTokenClassification(MoEBertPreTrainedModel, SparseBertForTokenClassification):
    backbone_class = MoEBertModel


class MoEBertForQuestionAnswering(MoEBertPreTrainedModel, SparseBertForQuestionAnswering):
    backbone_class = MoEBertModel
