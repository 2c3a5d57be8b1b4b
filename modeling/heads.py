"""Task heads shared by every family, as mixins over a family's ``PreTrainedModel``.

A family declares ``backbone_class`` (its base model) and, for masked LM, ``mlm_head_class``; the mixin
builds the backbone under the family's ``base_model_prefix`` so that base-model checkpoints load into
heads and back, as with transformers' own models. Losses are computed only when labels are given and
include the backbone's MoE balance loss (``aux_loss``), as paper 002 uses it in fine-tuning too.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .outputs import (
    CompactBertClassifierOutput,
    CompactBertMaskedLMOutput,
    CompactBertQuestionAnsweringOutput,
)

__all__ = [
    "BackboneHeadMixin",
    "MaskedLMHeadMixin",
    "QuestionAnsweringHeadMixin",
    "SequenceClassificationHeadMixin",
    "TokenClassificationHeadMixin",
]

_ROUTING_FIELDS = ("router_logits", "aux_loss", "expert_load", "dropped_token_fraction")


def _routing_fields(backbone_outputs) -> dict:
    return {name: getattr(backbone_outputs, name, None) for name in _ROUTING_FIELDS}


def _with_aux_loss(loss: torch.Tensor | None, backbone_outputs) -> torch.Tensor | None:
    aux_loss = getattr(backbone_outputs, "aux_loss", None)
    if loss is None or aux_loss is None:
        return loss
    return loss + aux_loss.to(loss.dtype)


def _finish(output, return_dict: bool | None):
    return output.to_tuple() if return_dict is False else output


def _classifier_dropout(config) -> float:
    return config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config) -> torch.Tensor:
    """Regression (MSE), single-label (cross-entropy) or multi-label (BCE), decided as transformers does."""
    num_labels = logits.shape[-1]
    problem_type = config.problem_type
    if problem_type is None:
        if num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1), labels.squeeze(-1).to(logits.dtype))
    if problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


class BackboneHeadMixin:
    backbone_class: type
    add_pooling_layer: bool = True

    def _build_backbone(self, config) -> None:
        setattr(self, self.base_model_prefix, self.backbone_class(config, add_pooling_layer=self.add_pooling_layer))

    def _backbone(self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, backbone_kwargs):
        return self.base_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            **backbone_kwargs,
        )


class SequenceClassificationHeadMixin(BackboneHeadMixin):
    """Pooled first token → dropout → linear classifier (or regressor when ``num_labels == 1``)."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_backbone(config)
        self.dropout = nn.Dropout(_classifier_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        return_dict=None,
        **backbone_kwargs,
    ):
        outputs = self._backbone(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, backbone_kwargs)
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None if labels is None else sequence_classification_loss(logits, labels, self.config)
        result = CompactBertClassifierOutput(
            loss=_with_aux_loss(loss, outputs),
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **_routing_fields(outputs),
        )
        return _finish(result, return_dict)


class TokenClassificationHeadMixin(BackboneHeadMixin):
    """Per-token dropout → linear classifier; labels of -100 are ignored."""

    add_pooling_layer = False

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_backbone(config)
        self.dropout = nn.Dropout(_classifier_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        return_dict=None,
        **backbone_kwargs,
    ):
        outputs = self._backbone(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, backbone_kwargs)
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1), ignore_index=-100)
        result = CompactBertClassifierOutput(
            loss=_with_aux_loss(loss, outputs),
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **_routing_fields(outputs),
        )
        return _finish(result, return_dict)


class QuestionAnsweringHeadMixin(BackboneHeadMixin):
    """Extractive QA: per-token start/end logits; the loss is the mean of start and end cross-entropy."""

    add_pooling_layer = False

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self._build_backbone(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        return_dict=None,
        **backbone_kwargs,
    ):
        outputs = self._backbone(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, backbone_kwargs)
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(dim=-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the sequence (answers truncated away) are clamped to an ignored index.
            ignored = start_logits.shape[1]
            start = start_positions.view(-1).clamp(0, ignored)
            end = end_positions.view(-1).clamp(0, ignored)
            loss = (
                F.cross_entropy(start_logits, start, ignore_index=ignored)
                + F.cross_entropy(end_logits, end, ignore_index=ignored)
            ) / 2
        result = CompactBertQuestionAnsweringOutput(
            loss=_with_aux_loss(loss, outputs),
            start_logits=start_logits.contiguous(),
            end_logits=end_logits.contiguous(),
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **_routing_fields(outputs),
        )
        return _finish(result, return_dict)


class MaskedLMHeadMixin(BackboneHeadMixin):
    """Masked-LM head whose decoder is tied to the word embeddings; labels of -100 are ignored."""

    add_pooling_layer = False
    mlm_head_class: type
    _tied_weights_keys = ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"]

    def __init__(self, config):
        super().__init__(config)
        self._build_backbone(config)
        self.cls = self.mlm_head_class(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Module:
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        return_dict=None,
        **backbone_kwargs,
    ):
        outputs = self._backbone(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, backbone_kwargs)
        logits = self.cls(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        result = CompactBertMaskedLMOutput(
            loss=_with_aux_loss(loss, outputs),
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **_routing_fields(outputs),
        )
        return _finish(result, return_dict)
