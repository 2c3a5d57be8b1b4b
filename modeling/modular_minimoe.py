"""MiniMoE: a MiniLM-shaped student with mixtures of minimal top-1 experts (paper 002 §3.2).

The modular source of ``models/minimoe/modeling_minimoe.py`` (``python -m utils.hub_code``), which defines the
classes compact-bert runs. The architecture is ``modeling_sparse_bert``; these classes only name the family's config and weight
prefix.
"""

from __future__ import annotations

from ..configuration.modular_minimoe import MiniMoEConfig
from .modeling_sparse_bert import (
    SparseBertForMaskedLM,
    SparseBertForQuestionAnswering,
    SparseBertForSequenceClassification,
    SparseBertForTokenClassification,
    SparseBertModel,
    SparseBertPreTrainedModel,
)

__all__ = [
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
