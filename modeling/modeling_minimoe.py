"""MiniMoE: a MiniLM-shaped student with mixtures of minimal top-1 experts (paper 002 §3.2)."""

from __future__ import annotations

from ..configuration.configuration_minimoe import MiniMoEConfig
from .heads import (
    MaskedLMHeadMixin,
    QuestionAnsweringHeadMixin,
    SequenceClassificationHeadMixin,
    TokenClassificationHeadMixin,
)
from .pretrained_base import CompactBertPreTrainedModel
from .sparse_bert_blocks import SparseBertModelMixin, SparseBertOnlyMLMHead

__all__ = [
    "MiniMoEForMaskedLM",
    "MiniMoEForQuestionAnswering",
    "MiniMoEForSequenceClassification",
    "MiniMoEForTokenClassification",
    "MiniMoEModel",
    "MiniMoEPreTrainedModel",
]


class MiniMoEPreTrainedModel(CompactBertPreTrainedModel):
    config_class = MiniMoEConfig
    base_model_prefix = "minimoe"
    _no_split_modules = ["SparseBertLayer"]


class MiniMoEModel(SparseBertModelMixin, MiniMoEPreTrainedModel):
    """Base model; see ``SparseBertModelMixin.forward`` for the arguments."""


class MiniMoEForMaskedLM(MaskedLMHeadMixin, MiniMoEPreTrainedModel):
    backbone_class = MiniMoEModel
    mlm_head_class = SparseBertOnlyMLMHead


class MiniMoEForSequenceClassification(SequenceClassificationHeadMixin, MiniMoEPreTrainedModel):
    backbone_class = MiniMoEModel


class MiniMoEForTokenClassification(TokenClassificationHeadMixin, MiniMoEPreTrainedModel):
    backbone_class = MiniMoEModel


class MiniMoEForQuestionAnswering(QuestionAnsweringHeadMixin, MiniMoEPreTrainedModel):
    backbone_class = MiniMoEModel


AUTO_CLASSES = {
    "AutoModel": MiniMoEModel,
    "AutoModelForMaskedLM": MiniMoEForMaskedLM,
    "AutoModelForSequenceClassification": MiniMoEForSequenceClassification,
    "AutoModelForTokenClassification": MiniMoEForTokenClassification,
    "AutoModelForQuestionAnswering": MiniMoEForQuestionAnswering,
}
