"""The task heads of every architecture, written once.

A head is the same whatever encoder sits below it: it builds ``backbone_class`` (the architecture's base
model) under the family's ``base_model_prefix``, reads the backbone's output by name, and returns the
backbone's per-layer states and routing fields with its own logits. Mixture-of-experts backbones fill
``aux_loss`` and the head adds it to the task loss (paper 002 fine-tunes with the balance loss); dense
backbones leave it ``None``. Each architecture file subclasses these heads with its ``PreTrainedModel``
first in the bases, so weight init and settings come from the architecture and the layout from here.

Tuples for ``return_dict=False`` (argument or config) come from transformers' ``can_return_tuple``; the
backbone is always asked for its output object, so a config with ``return_dict=False`` still works.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.utils import can_return_tuple

from .outputs import (
    CompactBertClassifierOutput,
    CompactBertMaskedLMOutput,
    CompactBertQuestionAnsweringOutput,
)
from .pretrained_base import CompactBertPreTrainedModel, tied_masked_lm_weights
from .task_losses import (
    add_balance_loss,
    classifier_dropout_probability,
    question_answering_loss,
    sequence_classification_loss,
    token_cross_entropy,
)

__all__ = [
    "CompactBertForMaskedLM",
    "CompactBertForQuestionAnswering",
    "CompactBertForSequenceClassification",
    "CompactBertForTokenClassification",
    "passed_through",
]

# What every head returns of its backbone's output: per-layer states and the routing fields.
_PASSED_THROUGH = ("hidden_states", "attentions", "router_logits", "aux_loss", "expert_load", "dropped_token_fraction")


def passed_through(backbone_outputs) -> dict:
    return {name: backbone_outputs.get(name) for name in _PASSED_THROUGH}


class CompactBertForMaskedLM(CompactBertPreTrainedModel):
    """Masked-LM head whose decoder is tied to the word embeddings; labels of -100 are ignored.

    ``mlm_head_class`` is the architecture's prediction head module, stored as ``cls`` as in BERT.
    """

    backbone_class: type[CompactBertPreTrainedModel]
    mlm_head_class: type[nn.Module]
    add_pooling_layer = False

    def __init__(self, config):
        super().__init__(config)
        setattr(self, self.base_model_prefix, self.backbone_class(config, add_pooling_layer=self.add_pooling_layer))
        self.cls = self.mlm_head_class(config)
        self._tied_weights_keys = tied_masked_lm_weights(self.base_model_prefix)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> CompactBertMaskedLMOutput:
        outputs = self.base_model(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.cls(outputs.last_hidden_state)
        loss = None if labels is None else token_cross_entropy(logits, labels)
        return CompactBertMaskedLMOutput(
            loss=add_balance_loss(loss, outputs.aux_loss), logits=logits, **passed_through(outputs)
        )


class CompactBertForSequenceClassification(CompactBertPreTrainedModel):
    """Pooled first token → dropout → linear classifier (or regressor when ``num_labels == 1``)."""

    backbone_class: type[CompactBertPreTrainedModel]

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        setattr(self, self.base_model_prefix, self.backbone_class(config))
        self.dropout = nn.Dropout(classifier_dropout_probability(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs,
    ) -> CompactBertClassifierOutput:
        outputs = self.base_model(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None if labels is None else sequence_classification_loss(logits, labels, self.config)
        return CompactBertClassifierOutput(
            loss=add_balance_loss(loss, outputs.aux_loss), logits=logits, **passed_through(outputs)
        )


class CompactBertForTokenClassification(CompactBertPreTrainedModel):
    """Per-token dropout → linear classifier; labels of -100 are ignored."""

    backbone_class: type[CompactBertPreTrainedModel]

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        setattr(self, self.base_model_prefix, self.backbone_class(config, add_pooling_layer=False))
        self.dropout = nn.Dropout(classifier_dropout_probability(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> CompactBertClassifierOutput:
        outputs = self.base_model(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None if labels is None else token_cross_entropy(logits, labels)
        return CompactBertClassifierOutput(
            loss=add_balance_loss(loss, outputs.aux_loss), logits=logits, **passed_through(outputs)
        )


class CompactBertForQuestionAnswering(CompactBertPreTrainedModel):
    """Extractive QA: per-token start/end logits."""

    backbone_class: type[CompactBertPreTrainedModel]

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        setattr(self, self.base_model_prefix, self.backbone_class(config, add_pooling_layer=False))
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        **kwargs,
    ) -> CompactBertQuestionAnsweringOutput:
        outputs = self.base_model(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(dim=-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = question_answering_loss(start_logits, end_logits, start_positions, end_positions)
        return CompactBertQuestionAnsweringOutput(
            loss=add_balance_loss(loss, outputs.aux_loss),
            start_logits=start_logits.contiguous(),
            end_logits=end_logits.contiguous(),
            **passed_through(outputs),
        )
