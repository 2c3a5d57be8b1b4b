"""IB-BERT: the inverted-bottleneck BERT_LARGE teacher of MobileBERT (paper 001 §3.1, Table 1)."""

from __future__ import annotations

from ..configuration.configuration_bottleneck_bert import IBBertConfig
from .heads import (
    MaskedLMHeadMixin,
    QuestionAnsweringHeadMixin,
    SequenceClassificationHeadMixin,
    TokenClassificationHeadMixin,
)
from .modeling_bottleneck_bert import BottleneckBertModelMixin, BottleneckBertOnlyMLMHead, BottleneckBertPreTrainingMixin
from .pretrained_base import CompactBertPreTrainedModel

__all__ = [
    "IBBertForMaskedLM",
    "IBBertForPreTraining",
    "IBBertForQuestionAnswering",
    "IBBertForSequenceClassification",
    "IBBertForTokenClassification",
    "IBBertModel",
    "IBBertPreTrainedModel",
]


class IBBertPreTrainedModel(CompactBertPreTrainedModel):
    config_class = IBBertConfig
    base_model_prefix = "ib_bert"
    _no_split_modules = ["BottleneckBertLayer"]


class IBBertModel(BottleneckBertModelMixin, IBBertPreTrainedModel):
    """Base model; see ``BottleneckBertModelMixin.forward`` for the arguments."""


class IBBertForPreTraining(BottleneckBertPreTrainingMixin, IBBertPreTrainedModel):
    backbone_class = IBBertModel


class IBBertForMaskedLM(MaskedLMHeadMixin, IBBertPreTrainedModel):
    backbone_class = IBBertModel
    mlm_head_class = BottleneckBertOnlyMLMHead


class IBBertForSequenceClassification(SequenceClassificationHeadMixin, IBBertPreTrainedModel):
    backbone_class = IBBertModel


class IBBertForTokenClassification(TokenClassificationHeadMixin, IBBertPreTrainedModel):
    backbone_class = IBBertModel


class IBBertForQuestionAnswering(QuestionAnsweringHeadMixin, IBBertPreTrainedModel):
    backbone_class = IBBertModel


AUTO_CLASSES = {
    "AutoModel": IBBertModel,
    "AutoModelForPreTraining": IBBertForPreTraining,
    "AutoModelForMaskedLM": IBBertForMaskedLM,
    "AutoModelForSequenceClassification": IBBertForSequenceClassification,
    "AutoModelForTokenClassification": IBBertForTokenClassification,
    "AutoModelForQuestionAnswering": IBBertForQuestionAnswering,
}
