"""Post-LN BERT blocks with optional top-1 MoE FFN and MHA, shared by MiniMoE and MoE-BERT.

Submodules keep BERT's names (``attention.self.query``, ``attention.output.LayerNorm``,
``intermediate.dense``, ``output.dense``, ``output.LayerNorm``) so that a dense config loads BERT
weights, PEFT's default targets apply, and distillation reads the same named modules from our models and
from transformers' ``BertModel``. An MoE FFN lives in ``moe`` (router + batched experts); its layer keeps
``output.LayerNorm`` for the post-LN residual.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer

from .attention import additive_attention_mask, merge_heads, scaled_dot_product_attention, split_heads
from .layer_stack import run_layer_stack
from .moe_layer import ExpertDispatch, ExpertLinear, MoEFeedForward, RoutingDecision, build_router, route
from .outputs import CompactBertModelOutput

__all__ = [
    "SparseBertAttention",
    "SparseBertEmbeddings",
    "SparseBertEncoder",
    "SparseBertLayer",
    "SparseBertModelMixin",
    "SparseBertOnlyMLMHead",
    "SparseBertPooler",
]


class SparseBertEmbeddings(nn.Module):
    """BERT embeddings: word + position + token type, LayerNorm, dropout."""

    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings)[None], persistent=False)

    def forward(self, input_ids, token_type_ids, position_ids, inputs_embeds) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        seq_length = inputs_embeds.shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = torch.zeros(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        embeddings = inputs_embeds + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(embeddings))


def _project(layer: nn.Module, hidden_states: torch.Tensor, dispatch: ExpertDispatch | None) -> torch.Tensor:
    if dispatch is None:
        return layer(hidden_states)
    batch, seq, width = hidden_states.shape
    return layer(hidden_states.reshape(batch * seq, width), dispatch).view(batch, seq, -1)


class SparseBertSelfAttention(nn.Module):
    """Multi-head self-attention; with ``num_attention_experts > 1`` every token's Q/K/V projections come
    from its routed expert (Switch Transformers' MoE attention, paper 002 appendix B)."""

    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.dropout_prob = config.attention_probs_dropout_prob
        width, experts = config.hidden_size, config.num_attention_experts
        for name in ("query", "key", "value"):
            setattr(self, name, nn.Linear(width, width) if experts == 1 else ExpertLinear(experts, width, width))

    def forward(self, hidden_states, additive_mask, dispatch, output_attentions):
        query, key, value = (
            split_heads(_project(layer, hidden_states, dispatch), self.num_attention_heads)
            for layer in (self.query, self.key, self.value)
        )
        dropout_p = self.dropout_prob if self.training else 0.0
        context, probs = scaled_dot_product_attention(query, key, value, additive_mask, dropout_p, output_attentions)
        return merge_heads(context), probs


class SparseBertSelfOutput(nn.Module):
    """Output projection (per expert, gate-weighted, for MoE attention), dropout, residual, LayerNorm."""

    def __init__(self, config):
        super().__init__()
        width, experts = config.hidden_size, config.num_attention_experts
        self.dense = nn.Linear(width, width) if experts == 1 else ExpertLinear(experts, width, width)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, context, residual, dispatch):
        output = _project(self.dense, context, dispatch)
        if dispatch is not None:
            output = output * dispatch.gate.view(*output.shape[:2], 1).to(output.dtype)
        return self.LayerNorm(self.dropout(output) + residual)


class SparseBertAttention(nn.Module):
    """MHA sublayer. MoE attention never drops tokens: a dropped token would vanish as key and value for
    every other token of its sequence, so the capacity factor applies to FFN experts only."""

    def __init__(self, config):
        super().__init__()
        self.num_experts = config.num_attention_experts
        self.aux_loss_type = config.router_aux_loss_type
        if self.num_experts > 1:
            self.router = build_router(config, config.hidden_size, self.num_experts)
        self.self = SparseBertSelfAttention(config)
        self.output = SparseBertSelfOutput(config)

    def forward(self, hidden_states, additive_mask, token_mask, input_ids, output_attentions):
        decision = dispatch = None
        if self.num_experts > 1:
            decision, dispatch = route(
                self.router, hidden_states, token_mask, input_ids, self.num_experts, None, self.aux_loss_type
            )
        context, probs = self.self(hidden_states, additive_mask, dispatch, output_attentions)
        return self.output(context, hidden_states, dispatch), probs, decision


class SparseBertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class SparseBertOutput(nn.Module):
    """FFN output: the dense down-projection (dense FFN only), dropout, residual, LayerNorm."""

    def __init__(self, config, has_dense: bool):
        super().__init__()
        if has_dense:
            self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, residual):
        if hasattr(self, "dense"):
            hidden_states = self.dense(hidden_states)
        return self.LayerNorm(self.dropout(hidden_states) + residual)


class SparseBertLayerOutput(NamedTuple):
    hidden_states: torch.Tensor
    attention_probs: torch.Tensor | None
    routing: tuple[RoutingDecision, ...]


class SparseBertLayer(GradientCheckpointingLayer):
    """Post-LN layer: MHA (dense or MoE) then FFN (dense or MoE), each with residual + LayerNorm."""

    def __init__(self, config):
        super().__init__()
        self.attention = SparseBertAttention(config)
        if config.num_experts > 1:
            self.moe = MoEFeedForward(config)
        else:
            self.intermediate = SparseBertIntermediate(config)
        self.output = SparseBertOutput(config, has_dense=config.num_experts == 1)

    def forward(self, hidden_states, additive_mask, token_mask, input_ids=None, output_attentions=False):
        attention_output, probs, attention_decision = self.attention(
            hidden_states, additive_mask, token_mask, input_ids, output_attentions
        )
        routing = () if attention_decision is None else (attention_decision,)
        if hasattr(self, "moe"):
            ffn_output, ffn_decision = self.moe(attention_output, token_mask, input_ids)
            routing = routing + (ffn_decision,)
        else:
            ffn_output = self.intermediate(attention_output)
        return SparseBertLayerOutput(self.output(ffn_output, attention_output), probs, routing)


class SparseBertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([SparseBertLayer(config) for _ in range(config.num_hidden_layers)])
        if config.use_auxiliary_attention:
            # Read only by self-attention relation distillation (paper 002 §3.2); its output is discarded.
            self.auxiliary_attention = SparseBertAttention(config)
        self.gradient_checkpointing = False


class SparseBertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class SparseBertPredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class SparseBertLMPredictionHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transform = SparseBertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def _tie_weights(self) -> None:
        # Loading replaces parameters, which breaks the alias; transformers calls this after loading.
        self.decoder.bias = self.bias

    def forward(self, hidden_states):
        return self.decoder(self.transform(hidden_states))


class SparseBertOnlyMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = SparseBertLMPredictionHead(config)

    def forward(self, sequence_output):
        return self.predictions(sequence_output)


def _routing_outputs(decisions: list[RoutingDecision], config, batch: int, seq: int, output_router_logits: bool):
    if not decisions:
        return {}
    aux_loss = config.router_aux_loss_coef * torch.stack([d.aux_loss for d in decisions]).mean()
    router_logits = None
    if output_router_logits and config.router_type == "top1":
        router_logits = tuple(d.router_logits.view(batch, seq, -1) for d in decisions)
    loads = [d.expert_load for d in decisions]
    # MHA and FFN blocks may have different expert counts: pad loads to the widest for one tensor.
    width = max(load.shape[0] for load in loads)
    expert_load = torch.stack([torch.nn.functional.pad(load, (0, width - load.shape[0])) for load in loads])
    return {
        "aux_loss": aux_loss,
        "router_logits": router_logits,
        "expert_load": expert_load,
        "dropped_token_fraction": torch.stack([d.dropped_fraction for d in decisions]),
    }


class SparseBertModelMixin:
    """The base model of a sparse-BERT family: embeddings, encoder, optional pooler.

    ``forward`` accepts BERT's arguments plus ``output_router_logits`` and ``run_auxiliary_attention``
    (run the auxiliary MHA block so that distillation hooks can read its Q/K/V).
    """

    def __init__(self, config, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = SparseBertEmbeddings(config)
        self.encoder = SparseBertEncoder(config)
        self.pooler = SparseBertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        output_attentions=None,
        output_hidden_states=None,
        output_router_logits=None,
        run_auxiliary_attention=False,
        return_dict=None,
    ):
        self.check_inputs(input_ids, inputs_embeds)
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if run_auxiliary_attention and not hasattr(self.encoder, "auxiliary_attention"):
            raise ValueError("`run_auxiliary_attention=True` needs a config with `use_auxiliary_attention=True`.")
        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        batch, seq = hidden_states.shape[:2]
        if attention_mask is None:
            attention_mask = torch.ones(batch, seq, dtype=torch.long, device=hidden_states.device)
        token_mask = attention_mask.bool()
        additive_mask = additive_attention_mask(attention_mask, hidden_states.dtype)

        stack = run_layer_stack(
            self.encoder.layer,
            hidden_states,
            lambda layer, states: layer(
                states, additive_mask, token_mask, input_ids=input_ids, output_attentions=output_attentions
            ),
            output_hidden_states,
            output_attentions,
        )
        hidden_states = stack.hidden_states
        decisions = [decision for layer_output in stack.layer_outputs for decision in layer_output.routing]
        if run_auxiliary_attention:
            self.encoder.auxiliary_attention(hidden_states, additive_mask, token_mask, input_ids, False)

        output = CompactBertModelOutput(
            last_hidden_state=hidden_states,
            pooler_output=self.pooler(hidden_states) if self.pooler is not None else None,
            hidden_states=stack.all_hidden_states,
            attentions=stack.all_attentions,
            **_routing_outputs(decisions, self.config, batch, seq, bool(output_router_logits)),
        )
        return output.to_tuple() if return_dict is False else output
