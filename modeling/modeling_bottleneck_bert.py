"""Bottleneck BERT: the one architecture behind IB-BERT and MobileBERT (paper 001 §3, Fig. 1, Table 1).

The one architecture source of two families: ``python -m utils.hub_code`` writes it out as
``models/ib_bert/modeling_ib_bert.py`` and ``models/compact_mobilebert/modeling_compact_mobilebert.py`` with every
``BottleneckBert`` name replaced by the family's (``modular_ib_bert.py``, ``modular_compact_mobilebert.py``), as
transformers' modular converter does. It reads top to bottom like transformers' model files: embeddings → attention
→ bottlenecks and FFNs → layer → encoder → pretrained base → heads, and holds only the model: faster kernels plug in
by name (``ALL_ATTENTION_FUNCTIONS``) or through compact-bert's explicit ``optimize_for_inference(model)``.

Module names and the order of operations follow transformers' ``MobileBertModel`` exactly, so that this MobileBERT
gives the same numbers for the same weights and checkpoints convert by renaming the prefix. What transformers cannot
express, and this does, is ``attention_input="inter_block"``: IB-BERT's query/key/value read the 512-d inter-block
features and produce the 1024-d all-head size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput, can_return_tuple

from ..configuration.modular_bottleneck_bert import BottleneckBertConfig
from .shared_blocks import (
    attention_function,
    check_id_ranges,
    init_unless_loaded,
    sequence_classification_loss,
    validate_model_inputs,
)

__all__ = [
    "BottleneckBertForMaskedLM",
    "BottleneckBertForPreTraining",
    "BottleneckBertForQuestionAnswering",
    "BottleneckBertForSequenceClassification",
    "BottleneckBertForTokenClassification",
    "BottleneckBertModel",
    "BottleneckBertPreTrainedModel",
]


@dataclass
class BottleneckBertForPreTrainingOutput(ModelOutput):
    """MLM + next-sentence-prediction output; ``loss`` is the sum of both losses (paper 001 eq. 4, α = 1)."""

    loss: torch.FloatTensor | None = None
    prediction_logits: torch.FloatTensor | None = None
    seq_relationship_logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


class BottleneckBertNoNorm(nn.Module):
    """``NoNorm(h) = γ ∘ h + β`` (eq. 1): an element-wise affine map in place of LayerNorm.

    It removes the mean/variance reductions that dominate MobileBERT's latency on phones (Table 7); the price is
    unnormalized activations (up to ~1e7), beyond float16's largest value: a float16 input is refused here, bf16 and
    fp32 are the supported precisions.
    """

    def __init__(self, hidden_size: int, eps: float | None = None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if hidden_states.dtype == torch.float16:
            raise ValueError(
                "NoNorm (normalization_type='no_norm') does not run in float16: a trained model's activations reach "
                "about 1e7, beyond float16's largest value 65504, so the outputs would be inf/NaN. Use bfloat16 "
                "(torch_dtype/dtype=torch.bfloat16, --bf16) or float32."
            )
        # One fused multiply-add kernel instead of two element-wise passes (~15% of MobileBERT's CPU latency).
        return torch.addcmul(self.bias, hidden_states, self.weight)


def normalization_layer(config, size: int) -> nn.Module:
    if config.normalization_type == "no_norm":
        return BottleneckBertNoNorm(size)
    return nn.LayerNorm(size, eps=config.layer_norm_eps)


class BottleneckBertEmbeddings(nn.Module):
    """Factorized embedding (§3.4): a ``embedding_size`` table, the kernel-3 "convolution" (concatenate the
    embeddings of positions t+1, t, t-1 and project to ``hidden_size``), then position + token type, normalization
    and dropout."""

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
        self.LayerNorm = normalization_layer(config, config.hidden_size)
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
        self.head_size = config.true_hidden_size // config.num_attention_heads
        self.scaling = self.head_size**-0.5
        self.dropout_prob = config.attention_probs_dropout_prob
        self.is_causal = False
        query_key_input = config.hidden_size if config.attention_input == "inter_block" else config.true_hidden_size
        value_input = config.true_hidden_size if config.attention_input == "intra_bottleneck" else config.hidden_size
        self.query = nn.Linear(query_key_input, config.true_hidden_size)
        self.key = nn.Linear(query_key_input, config.true_hidden_size)
        self.value = nn.Linear(value_input, config.true_hidden_size)

    def forward(self, query_input, key_input, value_input, attention_mask, output_attentions=False):
        shape = (*query_input.shape[:-1], -1, self.head_size)
        context, probs = attention_function(self.config, output_attentions)(
            self,
            self.query(query_input).view(shape).transpose(1, 2),
            self.key(key_input).view(shape).transpose(1, 2),
            self.value(value_input).view(shape).transpose(1, 2),
            attention_mask,
            dropout=self.dropout_prob if self.training else 0.0,
            scaling=self.scaling,
        )
        return context.reshape(*query_input.shape[:-1], -1), probs


class BottleneckBertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_bottleneck = config.use_bottleneck
        self.dense = nn.Linear(config.true_hidden_size, config.true_hidden_size)
        self.LayerNorm = normalization_layer(config, config.true_hidden_size)
        if not self.use_bottleneck:
            self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, residual):
        layer_outputs = self.dense(hidden_states)
        if not self.use_bottleneck:
            layer_outputs = self.dropout(layer_outputs)
        return self.LayerNorm(layer_outputs + residual)


class BottleneckBertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BottleneckBertSelfAttention(config)
        self.output = BottleneckBertSelfOutput(config)

    def forward(self, query_input, key_input, value_input, layer_input, attention_mask, output_attentions=False):
        context, probs = self.self(query_input, key_input, value_input, attention_mask, output_attentions)
        return self.output(context, layer_input), probs


class BottleneckBertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.true_hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BottleneckBertOutputBottleneck(nn.Module):
    """The output (inverted) bottleneck: intra → inter, residual from the layer input, normalization."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.true_hidden_size, config.hidden_size)
        self.LayerNorm = normalization_layer(config, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, residual):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class BottleneckBertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_bottleneck = config.use_bottleneck
        self.dense = nn.Linear(config.intermediate_size, config.true_hidden_size)
        self.LayerNorm = normalization_layer(config, config.true_hidden_size)
        if self.use_bottleneck:
            self.bottleneck = BottleneckBertOutputBottleneck(config)
        else:
            self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, intermediate_states, residual_tensor_1, residual_tensor_2):
        layer_output = self.dense(intermediate_states)
        if not self.use_bottleneck:
            return self.LayerNorm(self.dropout(layer_output) + residual_tensor_1)
        return self.bottleneck(self.LayerNorm(layer_output + residual_tensor_1), residual_tensor_2)


class BottleneckBertBottleneckLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intra_bottleneck_size)
        self.LayerNorm = normalization_layer(config, config.intra_bottleneck_size)

    def forward(self, hidden_states):
        return self.LayerNorm(self.dense(hidden_states))


class BottleneckBertBottleneck(nn.Module):
    """Input bottleneck inter → intra, plus the shared query/key bottleneck of MobileBERT. Returns the query, key
    and value inputs of the attention and the layer input (the attention's residual)."""

    def __init__(self, config):
        super().__init__()
        self.attention_input = config.attention_input
        self.input = BottleneckBertBottleneckLayer(config)
        if self.attention_input == "shared_bottleneck":
            self.attention = BottleneckBertBottleneckLayer(config)

    def forward(self, hidden_states) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        layer_input = self.input(hidden_states)
        if self.attention_input == "shared_bottleneck":
            shared = self.attention(hidden_states)
            return shared, shared, hidden_states, layer_input
        if self.attention_input == "intra_bottleneck":
            return layer_input, layer_input, layer_input, layer_input
        return hidden_states, hidden_states, hidden_states, layer_input


class BottleneckBertFFNOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.true_hidden_size)
        self.LayerNorm = normalization_layer(config, config.true_hidden_size)

    def forward(self, hidden_states, residual):
        return self.LayerNorm(self.dense(hidden_states) + residual)


class BottleneckBertFFNLayer(nn.Module):
    """One of the extra stacked FFNs of §3.2 (the last FFN of a layer is its ``intermediate``/``output``)."""

    def __init__(self, config):
        super().__init__()
        self.intermediate = BottleneckBertIntermediate(config)
        self.output = BottleneckBertFFNOutput(config)

    def forward(self, hidden_states):
        return self.output(self.intermediate(hidden_states), hidden_states)


class BottleneckBertLayer(GradientCheckpointingLayer):
    """Input bottleneck → MHA → ``num_feedforward_networks`` stacked FFNs → output bottleneck. Returns the hidden
    states and the attention probabilities (or ``None``)."""

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

    def forward(self, hidden_states, attention_mask, output_attentions=False):
        if self.use_bottleneck:
            query, key, value, layer_input = self.bottleneck(hidden_states)
        else:
            query = key = value = layer_input = hidden_states
        attention_output, probs = self.attention(query, key, value, layer_input, attention_mask, output_attentions)
        for ffn in getattr(self, "ffn", ()):
            attention_output = ffn(attention_output)
        return self.output(self.intermediate(attention_output), attention_output, hidden_states), probs


class BottleneckBertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BottleneckBertLayer(config) for _ in range(config.num_hidden_layers)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, attention_mask, output_attentions: bool, output_hidden_states: bool):
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        for layer in self.layer:
            hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            if output_attentions:
                all_attentions += (probs,)
        return hidden_states, all_hidden_states, all_attentions


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
    """MLM decoder matching the factorized embedding: the output matrix is the (tied) ``embedding_size`` table
    stacked with ``hidden_size - embedding_size`` extra learned rows."""

    def __init__(self, config):
        super().__init__()
        self.transform = BottleneckBertPredictionHeadTransform(config)
        self.dense = nn.Linear(config.vocab_size, config.hidden_size - config.embedding_size, bias=False)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def _tie_weights(self) -> None:
        # The decoder's bias is ``bias`` itself. transformers 5 ties it from ``_tied_weights_keys``; 4.57 calls this
        # after building and after loading. (Aliasing it in ``__init__`` instead made transformers 5 leave ``bias``
        # on the meta device when a base-model folder, which holds neither, was loaded into this head.)
        self.decoder.bias = self.bias

    def forward(self, hidden_states):
        hidden_states = self.transform(hidden_states)
        # [vocab, embedding_size] tied rows next to [vocab, hidden - embedding_size] extra ones; one fused matmul +
        # bias (a separate add over [batch, seq, vocab] logits costs as much as the matmul).
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


class BottleneckBertPreTrainedModel(PreTrainedModel):
    config_class = BottleneckBertConfig
    base_model_prefix = "bottleneck_bert"
    supports_gradient_checkpointing = True
    _no_split_modules = ["BottleneckBertLayer"]
    _supports_sdpa = True
    _supports_attention_backend = True
    # Head losses are per-batch means, so Trainer scales them for gradient accumulation itself.
    accepts_loss_kwargs = False

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Initialize every parameter and buffer a checkpoint does not hold: transformers 5 materializes a loaded
        model from the meta device and leaves the rest (non-persistent buffers included) uninitialized otherwise;
        4.57 initializes only modules with missing weights. A task head added to a saved base model relies on it."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init_unless_loaded(module.weight, std=std)
            if module.bias is not None:
                init_unless_loaded(module.bias, value=0.0)
        elif isinstance(module, nn.Embedding):
            if not getattr(module.weight, "_is_hf_initialized", False):
                module.weight.normal_(mean=0.0, std=std)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, (nn.LayerNorm, BottleneckBertNoNorm)):
            init_unless_loaded(module.weight, value=1.0)
            init_unless_loaded(module.bias, value=0.0)
        elif isinstance(module, BottleneckBertLMPredictionHead):
            init_unless_loaded(module.bias, value=0.0)
        elif isinstance(module, BottleneckBertEmbeddings):
            init_unless_loaded(module.position_ids, table=torch.arange(module.position_ids.shape[-1])[None])


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
    ) -> BaseModelOutputWithPooling:
        validate_model_inputs(self.config, input_ids, inputs_embeds, token_type_ids, position_ids, attention_mask)
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        try:
            hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        except IndexError:  # ids outside a table, on the CPU (an accelerator asserts on the device)
            check_id_ranges(self.config, input_ids, token_type_ids, position_ids)
            raise
        additive_mask = None
        if attention_mask is not None:
            # [batch, seq] 1/0 → [batch, 1, 1, seq] additive: 0 keeps a key, the dtype's minimum masks it.
            keep = attention_mask[:, None, None, :].to(hidden_states.dtype)
            additive_mask = (1.0 - keep) * torch.finfo(hidden_states.dtype).min
        last_hidden_state, all_hidden_states, all_attentions = self.encoder(
            hidden_states, additive_mask, bool(output_attentions), bool(output_hidden_states)
        )
        return BaseModelOutputWithPooling(
            last_hidden_state=last_hidden_state,
            pooler_output=self.pooler(last_hidden_state) if self.pooler is not None else None,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
        )


class BottleneckBertForMaskedLM(BottleneckBertPreTrainedModel):
    """Masked-LM head whose decoder is tied to the word embeddings; labels of -100 are ignored."""

    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "bottleneck_bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }

    def __init__(self, config):
        super().__init__(config)
        self.bottleneck_bert = BottleneckBertModel(config, add_pooling_layer=False)
        self.cls = BottleneckBertOnlyMLMHead(config)
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
    ) -> MaskedLMOutput:
        outputs = self.bottleneck_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.cls(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BottleneckBertForPreTraining(BottleneckBertPreTrainedModel):
    """MLM + next-sentence prediction, the pre-training objective of MobileBERT and IB-BERT."""

    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "bottleneck_bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }

    def __init__(self, config):
        super().__init__(config)
        self.bottleneck_bert = BottleneckBertModel(config)
        self.cls = BottleneckBertPreTrainingHeads(config)
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
        next_sentence_label: torch.LongTensor | None = None,
        **kwargs,
    ) -> BottleneckBertForPreTrainingOutput:
        outputs = self.bottleneck_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        prediction_logits, seq_relationship_logits = self.cls(outputs.last_hidden_state, outputs.pooler_output)
        losses = []
        if labels is not None:
            losses.append(F.cross_entropy(prediction_logits.view(-1, prediction_logits.shape[-1]), labels.view(-1)))
        if next_sentence_label is not None:
            losses.append(F.cross_entropy(seq_relationship_logits.view(-1, 2), next_sentence_label.view(-1)))
        return BottleneckBertForPreTrainingOutput(
            loss=sum(losses) if losses else None,
            prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class BottleneckBertForSequenceClassification(BottleneckBertPreTrainedModel):
    """Pooled first token → dropout → linear classifier (or regressor when ``num_labels == 1``)."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bottleneck_bert = BottleneckBertModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
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
    ) -> SequenceClassifierOutput:
        outputs = self.bottleneck_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(logits, labels, self.config)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BottleneckBertForTokenClassification(BottleneckBertPreTrainedModel):
    """Per-token dropout → linear classifier; labels of -100 are ignored."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bottleneck_bert = BottleneckBertModel(config, add_pooling_layer=False)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
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
    ) -> TokenClassifierOutput:
        outputs = self.bottleneck_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class BottleneckBertForQuestionAnswering(BottleneckBertPreTrainedModel):
    """Extractive QA: per-token start/end logits; positions outside the sequence are ignored, as in BERT."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self.bottleneck_bert = BottleneckBertModel(config, add_pooling_layer=False)
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
    ) -> QuestionAnsweringModelOutput:
        outputs = self.bottleneck_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(dim=-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            ignored = start_logits.shape[1]
            start_loss = F.cross_entropy(
                start_logits, start_positions.view(-1).clamp(0, ignored), ignore_index=ignored
            )
            end_loss = F.cross_entropy(end_logits, end_positions.view(-1).clamp(0, ignored), ignore_index=ignored)
            loss = (start_loss + end_loss) / 2
        return QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits.contiguous(),
            end_logits=end_logits.contiguous(),
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
