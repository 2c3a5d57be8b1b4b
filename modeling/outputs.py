"""``ModelOutput`` dataclasses shared by every compact-bert family.

Mixture-of-experts models fill the routing fields (``router_logits``, ``aux_loss``, ``expert_load``,
``dropped_token_fraction``); dense models leave them ``None``. Fields are always read by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.utils import ModelOutput

__all__ = [
    "CompactBertClassifierOutput",
    "CompactBertMaskedLMOutput",
    "CompactBertModelOutput",
    "CompactBertPreTrainingOutput",
    "CompactBertQuestionAnsweringOutput",
]


@dataclass
class CompactBertModelOutput(ModelOutput):
    """Output of a base model.

    Args:
        last_hidden_state: ``[batch, seq, hidden]`` output of the last layer (the inter-block feature map
            for the bottleneck family).
        pooler_output: ``[batch, hidden]`` pooled first token, when the model has a pooler.
        hidden_states: embeddings output plus every layer's output, with ``output_hidden_states=True``;
            these are the feature maps of feature-map transfer (paper 001 eq. 2).
        attentions: per layer ``[batch, heads, seq, seq]`` attention probabilities, with
            ``output_attentions=True`` (attention transfer, paper 001 eq. 3).
        router_logits: per MoE block ``[batch, seq, num_experts]`` float32 router logits, with
            ``output_router_logits=True`` (top-1 gating only).
        aux_loss: ``router_aux_loss_coef`` × the mean load-balancing loss over MoE blocks.
        expert_load: ``[num_moe_blocks, num_experts]`` fraction of real tokens routed to each expert.
        dropped_token_fraction: ``[num_moe_blocks]`` fraction of real tokens dropped by the capacity limit.
    """

    last_hidden_state: torch.FloatTensor | None = None
    pooler_output: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    router_logits: tuple[torch.FloatTensor, ...] | None = None
    aux_loss: torch.FloatTensor | None = None
    expert_load: torch.FloatTensor | None = None
    dropped_token_fraction: torch.FloatTensor | None = None


@dataclass
class CompactBertMaskedLMOutput(ModelOutput):
    """Masked-LM head output; ``loss`` (with labels) includes the backbone's ``aux_loss``."""

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    router_logits: tuple[torch.FloatTensor, ...] | None = None
    aux_loss: torch.FloatTensor | None = None
    expert_load: torch.FloatTensor | None = None
    dropped_token_fraction: torch.FloatTensor | None = None


@dataclass
class CompactBertPreTrainingOutput(ModelOutput):
    """MLM + next-sentence-prediction output; ``loss`` is the sum of both losses (paper 001 eq. 4, α = 1)."""

    loss: torch.FloatTensor | None = None
    prediction_logits: torch.FloatTensor | None = None
    seq_relationship_logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CompactBertClassifierOutput(ModelOutput):
    """Sequence- or token-classification output; ``loss`` (with labels) includes ``aux_loss``."""

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    router_logits: tuple[torch.FloatTensor, ...] | None = None
    aux_loss: torch.FloatTensor | None = None
    expert_load: torch.FloatTensor | None = None
    dropped_token_fraction: torch.FloatTensor | None = None


@dataclass
class CompactBertQuestionAnsweringOutput(ModelOutput):
    """Extractive QA output; ``loss`` (with start/end positions) includes ``aux_loss``."""

    loss: torch.FloatTensor | None = None
    start_logits: torch.FloatTensor | None = None
    end_logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    router_logits: tuple[torch.FloatTensor, ...] | None = None
    aux_loss: torch.FloatTensor | None = None
    expert_load: torch.FloatTensor | None = None
    dropped_token_fraction: torch.FloatTensor | None = None
