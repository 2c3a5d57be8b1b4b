"""MobileBERT and MobileBERT_TINY students (paper 001 §3, Table 1, appendix E).

The modular source of ``models/compact_mobilebert/modeling_compact_mobilebert.py`` (``python -m utils.hub_code``), which defines the
classes compact-bert runs. The architecture is ``modeling_bottleneck_bert``; these classes only name the student's config and weight
prefix. The prefix is transformers' own (``mobilebert``), so checkpoints of transformers' MobileBERT and of
this family share every weight name.
"""

from __future__ import annotations

from ..configuration.modular_bottleneck_bert import CompactMobileBertConfig
from .modeling_bottleneck_bert import (
    BottleneckBertForMaskedLM,
    BottleneckBertForPreTraining,
    BottleneckBertForQuestionAnswering,
    BottleneckBertForSequenceClassification,
    BottleneckBertForTokenClassification,
    BottleneckBertModel,
    BottleneckBertPreTrainedModel,
)

__all__ = [
    "CompactMobileBertForMaskedLM",
    "CompactMobileBertForPreTraining",
    "CompactMobileBertForQuestionAnswering",
    "CompactMobileBertForSequenceClassification",
    "CompactMobileBertForTokenClassification",
    "CompactMobileBertModel",
    "CompactMobileBertPreTrainedModel",
]


class CompactMobileBertPreTrainedModel(BottleneckBertPreTrainedModel):
    config_class = CompactMobileBertConfig
    base_model_prefix = "mobilebert"


class CompactMobileBertModel(CompactMobileBertPreTrainedModel, BottleneckBertModel):
    """Base model; see ``BottleneckBertModel.forward`` for the arguments."""


class CompactMobileBertForPreTraining(CompactMobileBertPreTrainedModel, BottleneckBertForPreTraining):
    backbone_class = CompactMobileBertModel


class CompactMobileBertForMaskedLM(CompactMobileBertPreTrainedModel, BottleneckBertForMaskedLM):
    backbone_class = CompactMobileBertModel


class CompactMobileBertForSequenceClassification(
    CompactMobileBertPreTrainedModel, BottleneckBertForSequenceClassification
):
    backbone_class = CompactMobileBertModel


class CompactMobileBertForTokenClassification(CompactMobileBertPreTrainedModel, BottleneckBertForTokenClassification):
    backbone_class = CompactMobileBertModel


class CompactMobileBertForQuestionAnswering(CompactMobileBertPreTrainedModel, BottleneckBertForQuestionAnswering):
    backbone_class = CompactMobileBertModel
