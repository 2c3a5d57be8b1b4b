"""Sparse BERT: the post-LN BERT with optional top-1 MoE FFN and MHA behind MiniMoE and MoE-BERT.

Reads top to bottom like transformers' model files: embeddings → attention → layer → encoder → base
model → task heads. Submodules keep BERT's names (``attention.self.query``, ``attention.output.LayerNorm``,
``intermediate.dense``, ``output.dense``, ``output.LayerNorm``) so that a dense config loads BERT weights,
PEFT's default targets apply, and distillation reads the same named modules from our models and from
transformers' ``BertModel``. An MoE FFN lives in ``moe`` (router + batched experts, ``moe_layer``); its
layer keeps ``output.LayerNorm`` for the post-LN residual. The families (``modular_minimoe``,
``modular_moe_bert``) are short subclasses that only name their config and weight prefix.
The task heads are the shared ones of ``task_heads``, built on ``SparseBertModel``; they hand
``output_attentions``, ``output_hidden_states`` and ``output_router_logits`` to it through ``**kwargs``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.utils import can_return_tuple

from ..configuration.sparse_bert_base import SparseBertConfigBase
from .attention import (
    additive_attention_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
    uses_eager_attention,
)
from .checkpoint_keys import register_legacy_checkpoint_keys, renamed_legacy_key
from .dense_implementations import dense_joined, dense_linear
from .moe_layer import (
    ExpertDispatch,
    ExpertLinear,
    HashRouter,
    MoEExperts,
    MoEFeedForward,
    RoutingDecision,
    build_router,
    hash_routing_table,
    route,
    summarize_routing,
)
from .outputs import CompactBertModelOutput
from .pretrained_base import (
    CompactBertPreTrainedModel,
    copy_unless_loaded,
    fill_unless_loaded,
    normal_unless_loaded,
)
from .task_heads import (
    CompactBertForMaskedLM,
    CompactBertForQuestionAnswering,
    CompactBertForSequenceClassification,
    CompactBertForTokenClassification,
)

__all__ = [
    "SparseBertEncoder",
    "SparseBertForMaskedLM",
    "SparseBertForQuestionAnswering",
    "SparseBertForSequenceClassification",
    "SparseBertForTokenClassification",
    "SparseBertLayer",
    "SparseBertModel",
    "SparseBertPreTrainedModel",
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
        embeddings = (
            inputs_embeds + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)
        )
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
        self.config = config
        self.num_attention_heads = config.num_attention_heads
        self.dropout_prob = config.attention_probs_dropout_prob
        width, experts = config.hidden_size, config.num_attention_experts
        for name in ("query", "key", "value"):
            setattr(
                self,
                name,
                nn.Linear(width, width) if experts == 1 else ExpertLinear(config, experts, width, width),
            )

    def forward(self, hidden_states, additive_mask, dispatch, output_attentions):
        projections = (self.query, self.key, self.value)
        if dispatch is None:  # dense projections of one input (one GEMM where ``dense_implementation`` joins them)
            states = dense_joined(self.config, projections, hidden_states)
        else:
            states = (_project(layer, hidden_states, dispatch) for layer in projections)
        query, key, value = (split_heads(projected, self.num_attention_heads) for projected in states)
        dropout_p = self.dropout_prob if self.training else 0.0
        eager = uses_eager_attention(self.config, output_attentions)
        context, probs = scaled_dot_product_attention(query, key, value, additive_mask, dropout_p, eager)
        return merge_heads(context), probs


class SparseBertSelfOutput(nn.Module):
    """Output projection (per expert, gate-weighted, for MoE attention), dropout, residual, LayerNorm."""

    def __init__(self, config):
        super().__init__()
        width, experts = config.hidden_size, config.num_attention_experts
        self.dense = nn.Linear(width, width) if experts == 1 else ExpertLinear(config, experts, width, width)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.config = config

    def forward(self, context, residual, dispatch):
        if dispatch is None:
            output = dense_linear(self.config, self.dense, context, dropout=self.dropout, residual=residual)
            return self.LayerNorm(output)
        output = _project(self.dense, context, dispatch)
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
        self.config = config

    def forward(self, hidden_states):
        return dense_linear(self.config, self.dense, hidden_states, activation=self.intermediate_act_fn)


class SparseBertOutput(nn.Module):
    """FFN output: the dense down-projection (dense FFN only), dropout, residual, LayerNorm."""

    def __init__(self, config, has_dense: bool):
        super().__init__()
        if has_dense:
            self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.config = config

    def forward(self, hidden_states, residual):
        if not hasattr(self, "dense"):  # the MoE block computed the FFN output
            return self.LayerNorm(self.dropout(hidden_states) + residual)
        output = dense_linear(self.config, self.dense, hidden_states, dropout=self.dropout, residual=residual)
        return self.LayerNorm(output)


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
            routing = (*routing, ffn_decision)
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

    def forward(
        self, hidden_states, additive_mask, token_mask, input_ids, output_attentions: bool, output_hidden_states: bool
    ) -> tuple[CompactBertModelOutput, list[RoutingDecision]]:
        """The layers' outputs and every MoE block's routing decision, in order."""
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        decisions = []
        for layer in self.layer:
            layer_output = layer(hidden_states, additive_mask, token_mask, input_ids, output_attentions)
            hidden_states = layer_output.hidden_states
            decisions.extend(layer_output.routing)
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            if output_attentions:
                all_attentions += (layer_output.attention_probs,)
        output = CompactBertModelOutput(
            last_hidden_state=hidden_states, hidden_states=all_hidden_states, attentions=all_attentions
        )
        return output, decisions


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


class SparseBertPreTrainedModel(CompactBertPreTrainedModel):
    """Weight init and settings of the architecture; each family names its config and weight prefix."""

    config_class = SparseBertConfigBase
    base_model_prefix = "sparse_bert"
    _no_split_modules = ["SparseBertLayer"]

    def __init_subclass__(cls, **kwargs):
        """Each family registers the renames of its earlier checkpoint keys with transformers 5 (``checkpoint_keys``)
        when the class naming its config is defined (not again for each head), in the package and in the shipped
        remote code alike."""
        super().__init_subclass__(**kwargs)
        model_type = getattr(cls.config_class, "model_type", "")
        if "config_class" in vars(cls) and model_type:
            register_legacy_checkpoint_keys(model_type)

    if hasattr(PreTrainedModel, "_fix_state_dict_key_on_load"):
        # transformers 4.57's per-class renaming of checkpoint keys on load (5.x uses the registered renames).
        @staticmethod
        def _fix_state_dict_key_on_load(key: str) -> tuple[str, bool]:
            key, renamed = PreTrainedModel._fix_state_dict_key_on_load(key)
            current = renamed_legacy_key(key)
            return current, renamed or current != key

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, (ExpertLinear, MoEExperts)):
            for name, parameter in module.named_parameters(recurse=False):
                if name.endswith("weight"):
                    normal_unless_loaded(parameter, self.config.initializer_range)
                else:
                    fill_unless_loaded(parameter, 0.0)
        elif isinstance(module, HashRouter):
            # The table is saved with the weights; a checkpoint without it gets the same table from the seed.
            copy_unless_loaded(module.token_to_expert, hash_routing_table(*module.table_arguments))


class SparseBertModel(SparseBertPreTrainedModel):
    """The base model: embeddings, encoder, optional pooler.

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

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        output_router_logits: bool | None = None,
        run_auxiliary_attention: bool = False,
    ) -> CompactBertModelOutput:
        self.check_inputs(input_ids, inputs_embeds, token_type_ids, position_ids)
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
        encoded, decisions = self.encoder(
            hidden_states, additive_mask, token_mask, input_ids, bool(output_attentions), bool(output_hidden_states)
        )
        if run_auxiliary_attention:
            self.encoder.auxiliary_attention(encoded.last_hidden_state, additive_mask, token_mask, input_ids, False)
        return CompactBertModelOutput(
            last_hidden_state=encoded.last_hidden_state,
            pooler_output=self.pooler(encoded.last_hidden_state) if self.pooler is not None else None,
            hidden_states=encoded.hidden_states,
            attentions=encoded.attentions,
            **summarize_routing(decisions, self.config, batch, seq, bool(output_router_logits)),
        )


class SparseBertForMaskedLM(SparseBertPreTrainedModel, CompactBertForMaskedLM):
    backbone_class = SparseBertModel
    mlm_head_class = SparseBertOnlyMLMHead


class SparseBertForSequenceClassification(SparseBertPreTrainedModel, CompactBertForSequenceClassification):
    backbone_class = SparseBertModel


class SparseBertForTokenClassification(SparseBertPreTrainedModel, CompactBertForTokenClassification):
    backbone_class = SparseBertModel


class SparseBertForQuestionAnswering(SparseBertPreTrainedModel, CompactBertForQuestionAnswering):
    backbone_class = SparseBertModel
