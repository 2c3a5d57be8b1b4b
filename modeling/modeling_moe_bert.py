"""MoE-BERT: BERT with every FFN a 64-expert top-1 MoE (paper 003 §2.2); one expert = its vanilla teacher."""

from __future__ import annotations

from ..configuration.configuration_moe_bert import MoEBertConfig
from .heads import (
    MaskedLMHeadMixin,
    QuestionAnsweringHeadMixin,
    SequenceClassificationHeadMixin,
    TokenClassificationHeadMixin,
)
from .pretrained_base import CompactBertPreTrainedModel
from .sparse_bert_blocks import SparseBertModelMixin, SparseBertOnlyMLMHead

__all__ = [
    "MoEBertForMaskedLM",
    "MoEBertForQuestionAnswering",
    "MoEBertForSequenceClassification",
    "MoEBertForTokenClassification",
    "MoEBertModel",
    "MoEBertPreTrainedModel",
]


class MoEBertPreTrainedModel(CompactBertPreTrainedModel):
    config_class = MoEBertConfig
    base_model_prefix = "moe_bert"
    _no_split_modules = ["SparseBertLayer"]


class MoEBertModel(SparseBertModelMixin, MoEBertPreTrainedModel):
    """Base model; see ``SparseBertModelMixin.forward`` for the arguments."""


class MoEBertForMaskedLM(MaskedLMHeadMixin, MoEBertPreTrainedModel):
    backbone_class = MoEBertModel
    mlm_head_class = SparseBertOnlyMLMHead


class MoEBertForSequenceClassification(SequenceClassificationHeadMixin, MoEBertPreTrainedModel):
    backbone_class = MoEBertModel


class MoEBertForTokenClassification(TokenClassificationHeadMixin, MoEBertPreTrainedModel):
    backbone_class = MoEBertModel


class MoEBertForQuestionAnswering(QuestionAnsweringHeadMixin, MoEBertPreTrainedModel):
    backbone_class = MoEBertModel


AUTO_CLASSES = {
    "AutoModel": MoEBertModel,
    "AutoModelForMaskedLM": MoEBertForMaskedLM,
    "AutoModelForSequenceClassification": MoEBertForSequenceClassification,
    "AutoModelForTokenClassification": MoEBertForTokenClassification,
    "AutoModelForQuestionAnswering": MoEBertForQuestionAnswering,
}
