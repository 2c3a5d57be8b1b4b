"""Model families of compact-bert and their shared building blocks."""

from __future__ import annotations

from .modeling_compact_mobilebert import (
    AUTO_CLASSES as COMPACT_MOBILEBERT_AUTO_CLASSES,
)
from .modeling_compact_mobilebert import (
    CompactMobileBertForMaskedLM,
    CompactMobileBertForPreTraining,
    CompactMobileBertForQuestionAnswering,
    CompactMobileBertForSequenceClassification,
    CompactMobileBertForTokenClassification,
    CompactMobileBertModel,
    CompactMobileBertPreTrainedModel,
)
from .modeling_ib_bert import (
    AUTO_CLASSES as IB_BERT_AUTO_CLASSES,
)
from .modeling_ib_bert import (
    IBBertForMaskedLM,
    IBBertForPreTraining,
    IBBertForQuestionAnswering,
    IBBertForSequenceClassification,
    IBBertForTokenClassification,
    IBBertModel,
    IBBertPreTrainedModel,
)
from .modeling_minimoe import (
    AUTO_CLASSES as MINIMOE_AUTO_CLASSES,
)
from .modeling_minimoe import (
    MiniMoEForMaskedLM,
    MiniMoEForQuestionAnswering,
    MiniMoEForSequenceClassification,
    MiniMoEForTokenClassification,
    MiniMoEModel,
    MiniMoEPreTrainedModel,
)
from .modeling_moe_bert import (
    AUTO_CLASSES as MOE_BERT_AUTO_CLASSES,
)
from .modeling_moe_bert import (
    MoEBertForMaskedLM,
    MoEBertForQuestionAnswering,
    MoEBertForSequenceClassification,
    MoEBertForTokenClassification,
    MoEBertModel,
    MoEBertPreTrainedModel,
)
from .outputs import (
    CompactBertClassifierOutput,
    CompactBertMaskedLMOutput,
    CompactBertModelOutput,
    CompactBertPreTrainingOutput,
    CompactBertQuestionAnsweringOutput,
)

__all__ = [
    "AUTO_CLASSES_BY_CONFIG",
    "CompactBertClassifierOutput",
    "CompactBertMaskedLMOutput",
    "CompactBertModelOutput",
    "CompactBertPreTrainingOutput",
    "CompactBertQuestionAnsweringOutput",
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

# Auto class name → model class, per family (what ``compact_bert`` registers and ``auto_map`` records).
AUTO_CLASSES_BY_CONFIG = {
    IBBertModel.config_class: IB_BERT_AUTO_CLASSES,
    CompactMobileBertModel.config_class: COMPACT_MOBILEBERT_AUTO_CLASSES,
    MiniMoEModel.config_class: MINIMOE_AUTO_CLASSES,
    MoEBertModel.config_class: MOE_BERT_AUTO_CLASSES,
}
