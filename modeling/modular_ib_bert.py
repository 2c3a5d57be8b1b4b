"""IB-BERT: the inverted-bottleneck BERT_LARGE teacher of MobileBERT (paper 001 §3.1, Table 1).

The modular source of ``models/ib_bert/modeling_ib_bert.py`` (``python -m utils.hub_code``), which defines the
classes compact-bert runs. The architecture is ``modeling_bottleneck_bert``; these classes only name IB-BERT's config and weight
prefix, so that IB-BERT checkpoints say which role they were built for.
"""

from __future__ import annotations

from ..configuration.modular_bottleneck_bert import IBBertConfig
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
    "IBBertForMaskedLM",
    "IBBertForPreTraining",
    "IBBertForQuestionAnswering",
    "IBBertForSequenceClassification",
    "IBBertForTokenClassification",
    "IBBertModel",
    "IBBertPreTrainedModel",
]


class IBBertPreTrainedModel(BottleneckBertPreTrainedModel):
    config_class = IBBertConfig
    base_model_prefix = "ib_bert"


class IBBertModel(IBBertPreTrainedModel, BottleneckBertModel):
    """Base model; see ``BottleneckBertModel.forward`` for the arguments."""


class IBBertForPreTraining(IBBertPreTrainedModel, BottleneckBertForPreTraining):
    backbone_class = IBBertModel


class IBBertForMaskedLM(IBBertPreTrainedModel, BottleneckBertForMaskedLM):
    backbone_class = IBBertModel


class IBBertForSequenceClassification(IBBertPreTrainedModel, BottleneckBertForSequenceClassification):
    backbone_class = IBBertModel


class IBBertForTokenClassification(IBBertPreTrainedModel, BottleneckBertForTokenClassification):
    backbone_class = IBBertModel


class IBBertForQuestionAnswering(IBBertPreTrainedModel, BottleneckBertForQuestionAnswering):
    backbone_class = IBBertModel
