"""Bottleneck BERT: the one architecture behind IB-BERT and MobileBERT (paper 001 §3, Fig. 1, Table 1).

Reads top to bottom like transformers' model files: embeddings → attention → layer → encoder → base
model → task heads. Module names and the order of operations follow transformers' ``MobileBertModel``
exactly, so that our MobileBERT gives the same numbers for the same weights and checkpoints convert by
renaming the prefix. What transformers cannot express, and this does, is ``attention_input="inter_block"``:
IB-BERT's query/key/value read the 512-d inter-block features and produce the 1024-d all-head size.
The families (``modular_ib_bert``, ``modular_compact_mobilebert``) are short subclasses of the classes
here that only name their config and weight prefix.
The task heads are the shared ones of ``task_heads``, built on ``BottleneckBertModel``; they hand
``output_attentions`` and ``output_hidden_states`` to it through ``**kwargs``. Only the pre-training head
(MLM + next-sentence prediction) is this architecture's own.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.utils import can_return_tuple

from ..configuration.modular_bottleneck_bert import BottleneckBertConfig
from .attention import (
    additive_attention_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
    uses_eager_attention,
)
from .dense_implementations import dense_joined, dense_linear
from .normalization import NoNorm, build_normalization
from .outputs import CompactBertModelOutput, CompactBertPreTrainingOutput
from .pretrained_base import CompactBertPreTrainedModel, fill_unless_loaded
from .task_heads import (
    CompactBertForMaskedLM,
    CompactBertForQuestionAnswering,
    CompactBertForSequenceClassification,
    CompactBertForTokenClassification,
)
from .task_losses import token_cross_entropy

__all__ = [
    "BottleneckBertEncoder",
    "BottleneckBertForMaskedLM",
    "BottleneckBertForPreTraining",
    "BottleneckBertForQuestionAnswering",
    "BottleneckBertForSequenceClassification",
    "BottleneckBertForTokenClassification",
    "BottleneckBertLayer",
    "BottleneckBertModel",
    "BottleneckBertPreTrainedModel",
]


def _norm(config, size: int) -> nn.Module:
    return build_normalization(config.normalization_type, size, config.layer_norm_eps)


class BottleneckBertEmbeddings(nn.Module):
    """Factorized embedding (§3.4): a ``embedding_size`` table, the kernel-3 "convolution" (concatenate
    the embeddings of positions t+1, t, t-1 and project to ``hidden_size``), then position + token type,
    normalization and dropout."""

    def __init__(self, config):
        super().__init__()
        self.trigram_input = config.trigram_input
        self.needs_transformation = config.trigram_input or config.embedding_size != config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        if self.needs_transformation:
            width = config.embedding_size * (3 if config.trigram_input else 1)
            self.embedding_transformation = nn.Linear(width, config.hidden_size)
        self.LayerNorm = _norm(config, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings)[None], persistent=False)

    def forward(self, input_ids, token_type_ids, position_ids, inputs_embeds) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        seq_length = inputs_embeds.shape[1]
        if self.trigram_input:
            following = F.pad(inputs_embeds[:, 1:], (0, 0, 0, 1))
            preceding = F.pad(inputs_embeds[:, :-1], (0, 0, 1, 0))
            inputs_embeds = torch.cat([following, inputs_embeds, preceding], dim=2)
        if self.needs_transformation:
            inputs_embeds = self.embedding_transformation(inputs_embeds)
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = torch.zeros(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        embeddings = (
            inputs_embeds + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)
        )
        return self.dropout(self.LayerNorm(embeddings))


class BottleneckBertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_attention_heads = config.num_attention_heads
        self.dropout_prob = config.attention_probs_dropout_prob
        all_head_size = config.true_hidden_size
        query_key_input = config.hidden_size if config.attention_input == "inter_block" else config.true_hidden_size
        value_input = config.true_hidden_size if config.attention_input == "intra_bottleneck" else config.hidden_size
        self.query = nn.Linear(query_key_input, all_head_size)
        self.key = nn.Linear(query_key_input, all_head_size)
        self.value = nn.Linear(value_input, all_head_size)

    def forward(self, query_input, key_input, value_input, additive_mask, output_attentions):
        query, key, value = self._project(query_input, key_input, value_input)
        query, key, value = (split_heads(states, self.num_attention_heads) for states in (query, key, value))
        dropout_p = self.dropout_prob if self.training else 0.0
        eager = uses_eager_attention(self.config, output_attentions)
        context, probs = scaled_dot_product_attention(query, key, value, additive_mask, dropout_p, eager)
        return merge_heads(context), probs

    def _project(self, query_input, key_input, value_input):
        """Q, K, V; the projections of one input tensor (query and key in MobileBERT, all three in IB-BERT and
        MobileBERT-TINY) joined, as one GEMM where ``dense_implementation`` joins them."""
        if query_input is not key_input:
            return tuple(
                dense_linear(self.config, linear, states)
                for linear, states in ((self.query, query_input), (self.key, key_input), (self.value, value_input))
            )
        if key_input is value_input:
            return dense_joined(self.config, (self.query, self.key, self.value), query_input)
        query, key = dense_joined(self.config, (self.query, self.key), query_input)
        return query, key, dense_linear(self.config, self.value, value_input)


class BottleneckBertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_bottleneck = config.use_bottleneck
        self.dense = nn.Linear(config.true_hidden_size, config.true_hidden_size)
        self.LayerNorm = _norm(config, config.true_hidden_size)
        if not self.use_bottleneck:
            self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.config = config

    def forward(self, hidden_states, residual):
        dropout = getattr(self, "dropout", None)
        return self.LayerNorm(dense_linear(self.config, self.dense, hidden_states, dropout=dropout, residual=residual))


class BottleneckBertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BottleneckBertSelfAttention(config)
        self.output = BottleneckBertSelfOutput(config)

    def forward(self, query_input, key_input, value_input, layer_input, additive_mask, output_attentions):
        context, probs = self.self(query_input, key_input, value_input, additive_mask, output_attentions)
        return self.output(context, layer_input), probs


class BottleneckBertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.true_hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]
        self.config = config

    def forward(self, hidden_states):
        return dense_linear(self.config, self.dense, hidden_states, activation=self.intermediate_act_fn)


class BottleneckBertOutputBottleneck(nn.Module):
    """The output (inverted) bottleneck: intra → inter, residual from the layer input, normalization."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.true_hidden_size, config.hidden_size)
        self.LayerNorm = _norm(config, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.config = config

    def forward(self, hidden_states, residual):
        output = dense_linear(self.config, self.dense, hidden_states, dropout=self.dropout, residual=residual)
        return self.LayerNorm(output)


class BottleneckBertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_bottleneck = config.use_bottleneck
        self.dense = nn.Linear(config.intermediate_size, config.true_hidden_size)
        self.LayerNorm = _norm(config, config.true_hidden_size)
        if self.use_bottleneck:
            self.bottleneck = BottleneckBertOutputBottleneck(config)
        else:
            self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.config = config

    def forward(self, intermediate_states, ffn_residual, layer_residual):
        dropout = getattr(self, "dropout", None)
        output = dense_linear(self.config, self.dense, intermediate_states, dropout=dropout, residual=ffn_residual)
        output = self.LayerNorm(output)
        return self.bottleneck(output, layer_residual) if self.use_bottleneck else output


class BottleneckBertBottleneckLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intra_bottleneck_size)
        self.LayerNorm = _norm(config, config.intra_bottleneck_size)
        self.config = config

    def forward(self, hidden_states):
        return self.LayerNorm(dense_linear(self.config, self.dense, hidden_states))


class AttentionInputs(NamedTuple):
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    layer_input: torch.Tensor


class BottleneckBertBottleneck(nn.Module):
    """Input bottleneck inter → intra, plus the shared query/key bottleneck of MobileBERT."""

    def __init__(self, config):
        super().__init__()
        self.attention_input = config.attention_input
        self.input = BottleneckBertBottleneckLayer(config)
        if self.attention_input == "shared_bottleneck":
            self.attention = BottleneckBertBottleneckLayer(config)

    def forward(self, hidden_states) -> AttentionInputs:
        if self.attention_input == "shared_bottleneck":
            # Both bottlenecks read the same features: one GEMM where ``dense_implementation`` joins them.
            bottlenecks = (self.input, self.attention)
            projected = dense_joined(self.input.config, [layer.dense for layer in bottlenecks], hidden_states)
            layer_input, shared = (layer.LayerNorm(states) for layer, states in zip(bottlenecks, projected))
            return AttentionInputs(shared, shared, hidden_states, layer_input)
        layer_input = self.input(hidden_states)
        if self.attention_input == "intra_bottleneck":
            return AttentionInputs(layer_input, layer_input, layer_input, layer_input)
        return AttentionInputs(hidden_states, hidden_states, hidden_states, layer_input)


class BottleneckBertFFNOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.true_hidden_size)
        self.LayerNorm = _norm(config, config.true_hidden_size)
        self.config = config

    def forward(self, hidden_states, residual):
        return self.LayerNorm(dense_linear(self.config, self.dense, hidden_states, residual=residual))


class BottleneckBertFFNLayer(nn.Module):
    """One of the extra stacked FFNs of §3.2 (the last FFN of a layer is its ``intermediate``/``output``)."""

    def __init__(self, config):
        super().__init__()
        self.intermediate = BottleneckBertIntermediate(config)
        self.output = BottleneckBertFFNOutput(config)

    def forward(self, hidden_states):
        return self.output(self.intermediate(hidden_states), hidden_states)


class BottleneckBertLayerOutput(NamedTuple):
    hidden_states: torch.Tensor
    attention_probs: torch.Tensor | None


class BottleneckBertLayer(GradientCheckpointingLayer):
    """Input bottleneck → MHA → ``num_feedforward_networks`` stacked FFNs → output bottleneck."""

    def __init__(self, config):
        super().__init__()
        self.use_bottleneck = config.use_bottleneck
        self.attention = BottleneckBertAttention(config)
        self.intermediate = BottleneckBertIntermediate(config)
        self.output = BottleneckBertOutput(config)
        if self.use_bottleneck:
            self.bottleneck = BottleneckBertBottleneck(config)
        if config.num_feedforward_networks > 1:
            self.ffn = nn.ModuleList(
                [BottleneckBertFFNLayer(config) for _ in range(config.num_feedforward_networks - 1)]
            )

    def forward(self, hidden_states, additive_mask, output_attentions=False) -> BottleneckBertLayerOutput:
        if self.use_bottleneck:
            inputs = self.bottleneck(hidden_states)
        else:
            inputs = AttentionInputs(hidden_states, hidden_states, hidden_states, hidden_states)
        attention_output, probs = self.attention(
            inputs.query, inputs.key, inputs.value, inputs.layer_input, additive_mask, output_attentions
        )
        for ffn in getattr(self, "ffn", ()):
            attention_output = ffn(attention_output)
        layer_output = self.output(self.intermediate(attention_output), attention_output, hidden_states)
        return BottleneckBertLayerOutput(layer_output, probs)


class BottleneckBertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BottleneckBertLayer(config) for _ in range(config.num_hidden_layers)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, additive_mask, output_attentions: bool, output_hidden_states: bool):
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        for layer in self.layer:
            layer_output = layer(hidden_states, additive_mask, output_attentions=output_attentions)
            hidden_states = layer_output.hidden_states
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            if output_attentions:
                all_attentions += (layer_output.attention_probs,)
        return CompactBertModelOutput(
            last_hidden_state=hidden_states, hidden_states=all_hidden_states, attentions=all_attentions
        )


class BottleneckBertPooler(nn.Module):
    """First token through dense + tanh, or the raw first token with ``classifier_activation=False``."""

    def __init__(self, config):
        super().__init__()
        self.do_activate = config.classifier_activation
        if self.do_activate:
            self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states):
        first_token = hidden_states[:, 0]
        return torch.tanh(self.dense(first_token)) if self.do_activate else first_token


class BottleneckBertPredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        # A real LayerNorm in either normalization type, as in MobileBERT's released models.
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class BottleneckBertLMPredictionHead(nn.Module):
    """MLM decoder matching the factorized embedding: the output matrix is the (tied) ``embedding_size``
    table stacked with ``hidden_size - embedding_size`` extra learned rows."""

    def __init__(self, config):
        super().__init__()
        self.transform = BottleneckBertPredictionHeadTransform(config)
        self.dense = nn.Linear(config.vocab_size, config.hidden_size - config.embedding_size, bias=False)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def _tie_weights(self) -> None:
        # Loading replaces parameters, which breaks the alias; transformers calls this after loading.
        self.decoder.bias = self.bias

    def forward(self, hidden_states):
        hidden_states = self.transform(hidden_states)
        # [vocab, embedding_size] tied rows next to [vocab, hidden - embedding_size] extra ones; one fused
        # matmul + bias (a separate add over [batch, seq, vocab] logits costs as much as the matmul).
        output_matrix = torch.cat([self.decoder.weight, self.dense.weight.t()], dim=1)
        return F.linear(hidden_states, output_matrix, self.decoder.bias)


class BottleneckBertOnlyMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = BottleneckBertLMPredictionHead(config)

    def forward(self, sequence_output):
        return self.predictions(sequence_output)


class BottleneckBertPreTrainingHeads(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = BottleneckBertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, sequence_output, pooled_output):
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


class BottleneckBertPreTrainedModel(CompactBertPreTrainedModel):
    """Weight init and settings of the architecture; each family names its config and weight prefix."""

    config_class = BottleneckBertConfig
    base_model_prefix = "bottleneck_bert"
    _no_split_modules = ["BottleneckBertLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, NoNorm):
            fill_unless_loaded(module.weight, 1.0)
            fill_unless_loaded(module.bias, 0.0)


class BottleneckBertModel(BottleneckBertPreTrainedModel):
    """The base model: factorized embeddings, bottleneck encoder, pooler."""

    def __init__(self, config, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BottleneckBertEmbeddings(config)
        self.encoder = BottleneckBertEncoder(config)
        self.pooler = BottleneckBertPooler(config) if add_pooling_layer else None
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
    ) -> CompactBertModelOutput:
        self.check_inputs(input_ids, inputs_embeds, token_type_ids, position_ids)
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        additive_mask = additive_attention_mask(attention_mask, hidden_states.dtype)
        encoded = self.encoder(hidden_states, additive_mask, bool(output_attentions), bool(output_hidden_states))
        return CompactBertModelOutput(
            last_hidden_state=encoded.last_hidden_state,
            pooler_output=self.pooler(encoded.last_hidden_state) if self.pooler is not None else None,
            hidden_states=encoded.hidden_states,
            attentions=encoded.attentions,
        )


class BottleneckBertForMaskedLM(BottleneckBertPreTrainedModel, CompactBertForMaskedLM):
    backbone_class = BottleneckBertModel
    mlm_head_class = BottleneckBertOnlyMLMHead


class BottleneckBertForPreTraining(BottleneckBertForMaskedLM):
    """MLM + next-sentence prediction, the pre-training objective of MobileBERT and IB-BERT."""

    mlm_head_class = BottleneckBertPreTrainingHeads
    add_pooling_layer = True

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        next_sentence_label: torch.LongTensor | None = None,
        **kwargs,
    ) -> CompactBertPreTrainingOutput:
        outputs = self.base_model(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        prediction_logits, seq_relationship_logits = self.cls(outputs.last_hidden_state, outputs.pooler_output)
        losses = []
        if labels is not None:
            losses.append(token_cross_entropy(prediction_logits, labels))
        if next_sentence_label is not None:
            losses.append(F.cross_entropy(seq_relationship_logits.view(-1, 2), next_sentence_label.view(-1)))
        return CompactBertPreTrainingOutput(
            loss=sum(losses) if losses else None,
            prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class BottleneckBertForSequenceClassification(BottleneckBertPreTrainedModel, CompactBertForSequenceClassification):
    backbone_class = BottleneckBertModel


class BottleneckBertForTokenClassification(BottleneckBertPreTrainedModel, CompactBertForTokenClassification):
    backbone_class = BottleneckBertModel


class BottleneckBertForQuestionAnswering(BottleneckBertPreTrainedModel, CompactBertForQuestionAnswering):
    backbone_class = BottleneckBertModel
