"""MobileBERT and MobileBERT_TINY students (paper 001 §3, Table 1, appendix E)."""

from __future__ import annotations

from ..configuration.configuration_bottleneck_bert import CompactMobileBertConfig
from .heads import (
    MaskedLMHeadMixin,
    QuestionAnsweringHeadMixin,
    SequenceClassificationHeadMixin,
    TokenClassificationHeadMixin,
)
from .modeling_bottleneck_bert import BottleneckBertModelMixin, BottleneckBertOnlyMLMHead, BottleneckBertPreTrainingMixin
from .pretrained_base import CompactBertPreTrainedModel

__all__ = [
    "CompactMobileBertForMaskedLM",
    "CompactMobileBertForPreTraining",
    "CompactMobileBertForQuestionAnswering",
    "CompactMobileBertForSequenceClassification",
    "CompactMobileBertForTokenClassification",
    "CompactMobileBertModel",
    "CompactMobileBertPreTrainedModel",
]


# The prefix is transformers' own ("mobilebert"), so checkpoints of transformers' MobileBERT and of
# this family share every weight name.
class CompactMobileBertPreTrainedModel(CompactBertPreTrainedModel):
    config_class = CompactMobileBertConfig
    base_model_prefix = "mobilebert"
    _no_split_modules = ["BottleneckBertLayer"]


class CompactMobileBertModel(BottleneckBertModelMixin, CompactMobileBertPreTrainedModel):
    """Base model; see ``BottleneckBertModelMixin.forward`` for the arguments."""


class CompactMobileBertForPreTraining(BottleneckBertPreTrainingMixin, CompactMobileBertPreTrainedModel):
    backbone_class = CompactMobileBertModel


class CompactMobileBertForMaskedLM(MaskedLMHeadMixin, CompactMobileBertPreTrainedModel):
    backbone_class = CompactMobileBertModel
    mlm_head_class = BottleneckBertOnlyMLMHead


class CompactMobileBertForSequenceClassification(SequenceClassificationHeadMixin, CompactMobileBertPreTrainedModel):
    backbone_class = CompactMobileBertModel


class CompactMobileBertForTokenClassification(TokenClassificationHeadMixin, CompactMobileBertPreTrainedModel):
    backbone_class = CompactMobileBertModel


class CompactMobileBertForQuestionAnswering(QuestionAnsweringHeadMixin, CompactMobileBertPreTrainedModel):
    backbone_class = CompactMobileBertModel


AUTO_CLASSES = {
    "AutoModel": CompactMobileBertModel,
    "AutoModelForPreTraining": CompactMobileBertForPreTraining,
    "AutoModelForMaskedLM": CompactMobileBertForMaskedLM,
    "AutoModelForSequenceClassification": CompactMobileBertForSequenceClassification,
    "AutoModelForTokenClassification": CompactMobileBertForTokenClassification,
    "AutoModelForQuestionAnswering": CompactMobileBertForQuestionAnswering,
}
