"""Sparse BERT: the post-LN BERT with optional top-1 mixture-of-experts FFN and MHA blocks (MiniMoE, MoE-BERT).

The one architecture source of two families: ``python -m utils.hub_code`` writes it out as
``models/minimoe/modeling_minimoe.py`` and ``models/moe_bert/modeling_moe_bert.py`` with every ``SparseBert`` name
replaced by the family's (``modular_minimoe.py``, ``modular_moe_bert.py``), as transformers' modular converter does.
It reads top to bottom like transformers' model files: embeddings → attention → FFN / experts → layer → encoder →
pretrained base → heads, imports only torch, transformers and the family's configuration, and holds only the model:
faster kernels plug in by name (``ALL_ATTENTION_FUNCTIONS``; on transformers 5 ``ALL_EXPERTS_FUNCTIONS`` through
``experts_implementation``) or through compact-bert's explicit ``optimize_for_inference(model)``.

Submodules keep BERT's names (``attention.self.query``, ``attention.output.LayerNorm``, ``intermediate.dense``,
``output.dense``, ``output.LayerNorm``) so that a dense config loads BERT weights, PEFT's default targets apply and
distillation reads the same named modules from these models and from transformers' ``BertModel``. An MoE FFN lives
in ``moe`` (router + experts); its layer keeps ``output.LayerNorm`` for the post-LN residual.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

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
from transformers.utils import can_return_tuple

from ..configuration.sparse_bert_base import SparseBertConfigBase
from .shared_blocks import (
    attention_function,
    check_id_ranges,
    init_unless_loaded,
    sequence_classification_loss,
    validate_model_inputs,
)

__all__ = [
    "SparseBertForMaskedLM",
    "SparseBertForQuestionAnswering",
    "SparseBertForSequenceClassification",
    "SparseBertForTokenClassification",
    "SparseBertModel",
    "SparseBertPreTrainedModel",
]


@dataclass
class SparseBertRoutingOutput:
    """The fields every output of these models adds to transformers' own (``None`` for a dense model): per MoE block
    the ``[batch, seq, num_experts]`` float32 ``router_logits`` of learned routers (``output_router_logits=True``);
    in training or with ``output_router_stats=True`` the ``aux_loss`` (``router_aux_loss_coef`` × the mean balance
    loss over blocks, included in a head's ``loss``), ``expert_load`` ``[num_moe_blocks, num_experts]`` (fraction of
    real tokens routed to each expert) and ``dropped_token_fraction`` ``[num_moe_blocks]`` (over capacity)."""

    router_logits: tuple[torch.FloatTensor, ...] | None = None
    aux_loss: torch.FloatTensor | None = None
    expert_load: torch.FloatTensor | None = None
    dropped_token_fraction: torch.FloatTensor | None = None


# transformers' outputs, the routing fields after theirs (dataclasses take the last base's fields first).
@dataclass
class SparseBertModelOutput(SparseBertRoutingOutput, BaseModelOutputWithPooling):
    """Output of the base model: ``BaseModelOutputWithPooling`` and the routing fields."""


@dataclass
class SparseBertMaskedLMOutput(SparseBertRoutingOutput, MaskedLMOutput):
    """Masked-LM output: ``MaskedLMOutput`` and the routing fields."""


@dataclass
class SparseBertSequenceClassifierOutput(SparseBertRoutingOutput, SequenceClassifierOutput):
    """Sequence-classification output: ``SequenceClassifierOutput`` and the routing fields."""


@dataclass
class SparseBertTokenClassifierOutput(SparseBertRoutingOutput, TokenClassifierOutput):
    """Token-classification output: ``TokenClassifierOutput`` and the routing fields."""


@dataclass
class SparseBertQuestionAnsweringOutput(SparseBertRoutingOutput, QuestionAnsweringModelOutput):
    """Extractive QA output: ``QuestionAnsweringModelOutput`` and the routing fields."""


@dataclass
class SparseBertRouting:
    """One MoE block's routing of ``T`` tokens: ``expert_index`` ``[T]``, float32 ``weight`` ``[T]`` (the expert's router
    probability, paper 003 eq. 3; 1 for hash routing; 0 for padding and over capacity), ``router_logits``, and in
    training or when asked the unweighted ``aux_loss``, ``expert_load`` and ``dropped_fraction`` of the block."""

    expert_index: torch.Tensor
    weight: torch.Tensor
    router_logits: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None
    expert_load: torch.Tensor | None = None
    dropped_fraction: torch.Tensor | None = None


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
        if position_ids is None:
            position_ids = self.position_ids[:, : inputs_embeds.shape[1]]
        if token_type_ids is None:
            token_type_ids = torch.zeros(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        embeddings = inputs_embeds + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings + self.token_type_embeddings(token_type_ids)))


class SparseBertExpertLinear(nn.Module):
    """``num_experts`` affine maps stored as one ``[num_experts, out, in]`` weight: MoE attention's projections. Called as
    the FFN experts are (``top_k_index`` and ``top_k_weights`` ``[T, 1]`` for the ``T`` tokens of ``hidden_states``,
    whose leading shape it keeps, as ``nn.Linear`` does for hooks), but not through transformers' experts interface,
    whose implementations compute a whole FFN from ``up_proj`` / ``down_proj``."""

    def __init__(self, num_experts: int, in_features: int, out_features: int):
        super().__init__()
        self.num_experts = num_experts
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(num_experts, out_features))

    def extra_repr(self) -> str:  # shown in PEFT's "Target module ... is not supported"
        return f"num_experts={self.num_experts}; a stacked weight: LoRA `target_parameters=['<name>.weight']`"

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        weight = top_k_weights.reshape(-1, 1).to(hidden_states.dtype)
        target = torch.where(weight.view(-1) != 0, top_k_index.reshape(-1), self.num_experts)  # weight 0: no expert
        outputs = flat.new_zeros(flat.shape[0], self.out_features)
        # One unbind, not ``weight[e]`` per expert, whose backward writes a zero gradient the size of all experts each.
        weights, biases = self.weight.unbind(0), self.bias.unbind(0)
        # A fixed loop over the experts, each selecting its rows with ``nonzero``: right for any routing, compiled too.
        for expert in range(self.num_experts):
            positions = (target == expert).nonzero().squeeze(-1)
            expert_outputs = F.linear(flat.index_select(0, positions), weights[expert], biases[expert])
            outputs.index_add_(0, positions, expert_outputs * weight.index_select(0, positions))
        return outputs.view(*hidden_states.shape[:-1], self.out_features)


class SparseBertSelfAttention(nn.Module):
    """Multi-head self-attention; with ``num_attention_experts > 1`` every token's Q/K/V projections come from its
    routed expert (Switch Transformers' MoE attention, paper 002 appendix B)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_size**-0.5
        self.dropout_prob = config.attention_probs_dropout_prob
        self.is_causal = False
        width, experts = config.hidden_size, config.num_attention_experts
        for name in ("query", "key", "value"):
            setattr(
                self, name, nn.Linear(width, width) if experts == 1 else SparseBertExpertLinear(experts, width, width)
            )

    def forward(self, hidden_states, attention_mask, experts_arguments=(), output_attentions=False):
        """``experts_arguments``: MoE attention's ``(top_k_index, top_k_weights)`` for the projections."""
        projections = (layer(hidden_states, *experts_arguments) for layer in (self.query, self.key, self.value))
        shape = (*hidden_states.shape[:-1], -1, self.head_size)
        query, key, value = (projection.view(shape).transpose(1, 2) for projection in projections)
        dropout = self.dropout_prob if self.training else 0.0
        context, probs = attention_function(self.config, output_attentions)(
            self, query, key, value, attention_mask, dropout=dropout, scaling=self.scaling
        )
        return context.reshape(*hidden_states.shape[:-1], -1), probs


class SparseBertSelfOutput(nn.Module):
    """Output projection (per expert and gate-weighted for MoE attention), dropout, residual, LayerNorm."""

    def __init__(self, config):
        super().__init__()
        width, experts = config.hidden_size, config.num_attention_experts
        self.dense = nn.Linear(width, width) if experts == 1 else SparseBertExpertLinear(experts, width, width)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor, routing=None, experts_arguments=None):
        if routing is None:
            return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)
        # The gate weight is applied in float32, as the router computes it.
        output = self.dense(hidden_states, *experts_arguments) * routing.weight.view(*hidden_states.shape[:-1], 1)
        return self.LayerNorm(self.dropout(output.to(hidden_states.dtype)) + input_tensor)


def load_balancing_loss(
    router_probs: torch.Tensor, expert_index: torch.Tensor, valid: torch.Tensor, loss_type: str
) -> torch.Tensor:
    """Balance loss over the real tokens (``valid``) of one MoE block.

    ``switch``: ``m · Σ_j f_j · P_j`` (paper 002 §3.2, α applied by the caller), f_j the fraction of tokens whose
    top-1 expert is j, P_j the mean router probability of j; equals 1 for uniform routing, its minimum.
    ``kl_uniform``: ``KL(u ‖ q) = Σ_j u_j log(u_j / q_j)`` with u uniform and q the mean router distribution
    (paper 003 eq. 4-5); 0 for a uniform q.
    """
    num_experts = router_probs.shape[-1]
    weights = valid.to(router_probs.dtype)
    num_tokens = weights.sum().clamp(min=1.0)
    mean_probs = (weights @ router_probs) / num_tokens
    if loss_type == "switch":
        return num_experts * (expert_fractions(expert_index, weights, num_experts) * mean_probs).sum()
    divergence = -math.log(num_experts) - torch.log(mean_probs.clamp(min=torch.finfo(mean_probs.dtype).tiny)).mean()
    # A block that saw no real token (a fully padded batch) has no distribution to balance.
    return divergence * (weights.sum() > 0).to(divergence.dtype)


def expert_fractions(expert_index: torch.Tensor, weights: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Fraction of the (weighted) tokens whose top-1 choice is each expert; a comparison rather than ``bincount``,
    whose data-dependent output size export cannot express."""
    chosen = expert_index.unsqueeze(-1) == torch.arange(num_experts, device=expert_index.device)
    return (chosen.to(weights.dtype) * weights.unsqueeze(-1)).sum(0) / weights.sum().clamp(min=1.0)


def capacity_keep(expert_index: torch.Tensor, valid: torch.Tensor, num_experts: int, capacity_factor: float):
    """Keep the first ``ceil(capacity_factor · real_tokens / num_experts)`` real tokens of each expert, in order
    (Switch Transformers): the dropped overflow is exactly each expert's last ``count - capacity`` tokens."""
    capacity = torch.ceil(capacity_factor * valid.sum() / num_experts)
    assignment = (expert_index.unsqueeze(-1) == torch.arange(num_experts, device=expert_index.device)).long()
    assignment = assignment * valid.unsqueeze(-1)
    rank = (assignment.cumsum(0) * assignment).sum(-1) - 1
    return valid & (rank < capacity)


def hash_routing_table(vocab_size: int, num_experts: int, hash_seed: int) -> torch.Tensor:
    """A balanced random partition of the vocabulary: each expert gets ``vocab / m`` token ids."""
    generator = torch.Generator().manual_seed(hash_seed)
    table = torch.empty(vocab_size, dtype=torch.long)
    table[torch.randperm(vocab_size, generator=generator)] = torch.arange(vocab_size) % num_experts
    return table


class SparseBertRouter(nn.Module):
    """Top-1 routing of one MoE block, with the capacity limit and the balance terms.

    ``router_type="top1"``: a learned gate ``p = softmax(W x + b)`` in float32 (``gate``, as in Mixtral), expert
    ``argmax p``, weight ``p_k``; ``"hash"``: a fixed random hash of the token id (Roller et al., 2021; paper 002
    appendix B), weight 1, its table saved with the weights or regenerated from ``hash_seed``. Padding is never routed:
    it takes no capacity, is not in the balance loss, gets weight 0. In eval mode without ``output_stats`` only the
    choice and its weight are computed (the balance terms cost as much again).
    """

    def __init__(self, config, num_experts: int, capacity_factor: float | None, eval_capacity_factor: float | None):
        super().__init__()
        self.num_experts = num_experts
        self.capacity_factor = capacity_factor
        self.eval_capacity_factor = eval_capacity_factor
        self.aux_loss_type = config.router_aux_loss_type
        self.hash_seed = config.hash_seed
        if config.router_type == "hash":
            self.register_buffer("token_to_expert", hash_routing_table(config.vocab_size, num_experts, self.hash_seed))
        else:
            self.gate = nn.Linear(config.hidden_size, num_experts)

    def forward(self, hidden_states, token_mask, input_ids, output_stats: bool = False) -> SparseBertRouting:
        valid = token_mask.reshape(-1).bool()
        router_logits = router_probs = None
        if hasattr(self, "gate"):
            router_logits = self.gate(hidden_states.reshape(-1, hidden_states.shape[-1])).float()
            router_probs = torch.softmax(router_logits, dim=-1)
            weight, expert_index = router_probs.max(dim=-1)
        elif input_ids is None:
            raise ValueError("Hash routing picks experts from token ids: pass `input_ids`, not `inputs_embeds`.")
        else:
            expert_index = self.token_to_expert[input_ids.reshape(-1)]
            weight = valid.float()
        factor = self.capacity_factor if self.training else self.eval_capacity_factor
        keep = valid if factor is None else capacity_keep(expert_index, valid, self.num_experts, factor)
        routing = SparseBertRouting(expert_index=expert_index, weight=weight * keep, router_logits=router_logits)
        if self.training or output_stats:
            routing.aux_loss = (
                torch.zeros((), device=expert_index.device)
                if router_probs is None
                else load_balancing_loss(router_probs, expert_index, valid, self.aux_loss_type)
            )
            routing.expert_load = expert_fractions(expert_index, valid.float(), self.num_experts).detach()
            routing.dropped_fraction = ((valid & ~keep).sum() / valid.sum().clamp(min=1)).detach()
        return routing


class SparseBertAttention(nn.Module):
    """MHA sublayer. MoE attention never drops tokens: a dropped token would vanish as key and value for every other
    token of its sequence, so the capacity factor applies to FFN experts only."""

    def __init__(self, config):
        super().__init__()
        if config.num_attention_experts > 1:
            self.router = SparseBertRouter(config, config.num_attention_experts, None, None)
        self.self = SparseBertSelfAttention(config)
        self.output = SparseBertSelfOutput(config)

    def forward(self, hidden_states, attention_mask, token_mask, input_ids, output_attentions, output_router_stats):
        if not hasattr(self, "router"):
            context, probs = self.self(hidden_states, attention_mask, output_attentions=output_attentions)
            return self.output(context, hidden_states), probs, None
        routing = self.router(hidden_states, token_mask, input_ids, output_router_stats)
        # Q, K and V are not gate-weighted: every routed token gets its expert's projections (weight 1).
        experts_arguments = (routing.expert_index.unsqueeze(-1), (routing.weight != 0).unsqueeze(-1))
        context, probs = self.self(hidden_states, attention_mask, experts_arguments, output_attentions)
        return self.output(context, hidden_states, routing, experts_arguments), probs, routing


class SparseBertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


def use_experts_implementation(**options) -> Callable[[type], type]:
    """transformers 5's experts interface: ``forward`` runs what ``config._experts_implementation`` names in
    ``ALL_EXPERTS_FUNCTIONS`` (``grouped_mm``, ``batched_mm``, …), or the class's own; 4.57 has none: its own."""
    try:
        from transformers.integrations.moe import use_experts_implementation as experts_interface
    except ImportError:
        return lambda experts_class: experts_class
    return experts_interface(**options)


@use_experts_implementation(has_gate=False, has_bias=True)
class SparseBertExperts(nn.Module):
    """``num_experts`` FFNs (``hidden → expert_intermediate_size → hidden``) as stacked ``[E, out, in]`` weights
    ``up_proj`` and ``down_proj`` with biases, behind transformers' experts interface; weight-0 tokens get zeros."""

    def __init__(self, config):
        super().__init__()
        self.num_experts = config.num_experts
        intermediate_size = config.expert_intermediate_size
        self.up_proj = nn.Parameter(torch.empty(self.num_experts, intermediate_size, config.hidden_size))
        self.up_proj_bias = nn.Parameter(torch.zeros(self.num_experts, intermediate_size))
        self.down_proj = nn.Parameter(torch.empty(self.num_experts, config.hidden_size, intermediate_size))
        self.down_proj_bias = nn.Parameter(torch.zeros(self.num_experts, config.hidden_size))
        self.act_fn = ACT2FN[config.hidden_act]

    def extra_repr(self) -> str:  # shown in PEFT's "Target module ... is not supported"
        return f"num_experts={self.num_experts}; LoRA `target_parameters=['experts.up_proj', 'experts.down_proj']`"

    def forward(self, hidden_states, top_k_index, top_k_weights) -> torch.Tensor:
        weight = top_k_weights.reshape(-1, 1).to(hidden_states.dtype)
        target = torch.where(weight.view(-1) != 0, top_k_index.reshape(-1), self.num_experts)
        outputs = torch.zeros_like(hidden_states)
        # One unbind per call (see ``SparseBertExpertLinear``), and the same fixed loop over the experts.
        up, up_bias = self.up_proj.unbind(0), self.up_proj_bias.unbind(0)
        down, down_bias = self.down_proj.unbind(0), self.down_proj_bias.unbind(0)
        for expert in range(self.num_experts):
            positions = (target == expert).nonzero().squeeze(-1)
            inner = self.act_fn(F.linear(hidden_states.index_select(0, positions), up[expert], up_bias[expert]))
            expert_outputs = F.linear(inner, down[expert], down_bias[expert]) * weight.index_select(0, positions)
            outputs.index_add_(0, positions, expert_outputs)
        return outputs


class SparseBertSparseFeedForward(nn.Module):
    """Top-1 MoE FFN block: ``p_k(x) · FFN_k(x)`` (paper 002 §3.2; paper 003 eq. 1-3)."""

    def __init__(self, config):
        super().__init__()
        self.router = SparseBertRouter(config, config.num_experts, config.capacity_factor, config.eval_capacity_factor)
        self.experts = SparseBertExperts(config)

    def forward(self, hidden_states, token_mask, input_ids, output_router_stats: bool = False):
        """The block's output and its ``SparseBertRouting``."""
        routing = self.router(hidden_states, token_mask, input_ids, output_router_stats)
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        weights = routing.weight.unsqueeze(-1).to(flat.dtype)
        outputs = self.experts(flat, routing.expert_index.unsqueeze(-1), weights)
        return outputs.view_as(hidden_states), routing


class SparseBertOutput(nn.Module):
    """FFN output: the dense down-projection (dense FFN only), dropout, residual, LayerNorm."""

    def __init__(self, config):
        super().__init__()
        if config.num_experts == 1:
            self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        if hasattr(self, "dense"):  # an MoE block computed the FFN output itself
            hidden_states = self.dense(hidden_states)
        return self.LayerNorm(self.dropout(hidden_states) + input_tensor)


class SparseBertLayer(GradientCheckpointingLayer):
    """Post-LN MHA then FFN, each dense or MoE; returns the hidden states, attention probabilities and routings."""

    def __init__(self, config):
        super().__init__()
        self.attention = SparseBertAttention(config)
        if config.num_experts > 1:
            self.moe = SparseBertSparseFeedForward(config)
        else:
            self.intermediate = SparseBertIntermediate(config)
        self.output = SparseBertOutput(config)

    def forward(self, hidden_states, attention_mask, token_mask, input_ids, output_attentions, output_router_stats):
        attention_output, probs, attention_routing = self.attention(
            hidden_states, attention_mask, token_mask, input_ids, output_attentions, output_router_stats
        )
        routing = () if attention_routing is None else (attention_routing,)
        if hasattr(self, "moe"):
            ffn_output, ffn_routing = self.moe(attention_output, token_mask, input_ids, output_router_stats)
            routing = (*routing, ffn_routing)
        else:
            ffn_output = self.intermediate(attention_output)
        return self.output(ffn_output, attention_output), probs, routing


class SparseBertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([SparseBertLayer(config) for _ in range(config.num_hidden_layers)])
        if config.use_auxiliary_attention:
            # Trained and read only by self-attention relation distillation (paper 002 §3.2): no part of ``forward``,
            # it runs on the last layer's output while a distillation hook records it.
            self.auxiliary_attention = SparseBertAttention(config)
        self.gradient_checkpointing = False

    def forward(
        self,
        hidden_states,
        attention_mask,
        token_mask,
        input_ids,
        output_attentions,
        output_hidden_states,
        output_router_stats,
    ):
        """The last hidden states, every layer's hidden states and attentions (when asked) and every MoE block's
        routing, in order. ``attention_mask`` is the additive ``[batch, 1, 1, seq]`` mask, ``token_mask`` the
        ``[batch, seq]`` 1 / 0 one (padding is never routed)."""
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        routings = []
        for layer in self.layer:
            hidden_states, probs, routing = layer(
                hidden_states, attention_mask, token_mask, input_ids, output_attentions, output_router_stats
            )
            routings.extend(routing)
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            if output_attentions:
                all_attentions += (probs,)
        return hidden_states, all_hidden_states, all_attentions, routings


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
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def _tie_weights(self) -> None:
        # The decoder's bias is ``bias`` itself. transformers 5 ties it from ``_tied_weights_keys``; 4.57 calls this
        # after building and after loading. (Aliasing it in ``__init__`` instead made transformers 5 leave ``bias``
        # on the meta device when a base-model folder, which holds neither, was loaded into this head.)
        self.decoder.bias = self.bias

    def forward(self, hidden_states):
        return self.decoder(self.transform(hidden_states))


class SparseBertOnlyMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = SparseBertLMPredictionHead(config)

    def forward(self, sequence_output):
        return self.predictions(sequence_output)


def routing_outputs(routings: list[SparseBertRouting], config, shape, output_router_logits: bool | None) -> dict:
    """A model output's routing fields from every MoE block's routing; loads are padded to the widest block's experts
    (MHA and FFN blocks may differ), for one tensor."""
    router_logits = tuple(r.router_logits.view(*shape, -1) for r in routings if r.router_logits is not None)
    outputs = {"router_logits": router_logits if output_router_logits and router_logits else None}
    if routings[0].aux_loss is None:
        return outputs
    width = max(config.num_experts, config.num_attention_experts)
    loads = [F.pad(routing.expert_load, (0, width - routing.expert_load.shape[0])) for routing in routings]
    return {
        **outputs,
        "aux_loss": config.router_aux_loss_coef * torch.stack([routing.aux_loss for routing in routings]).mean(),
        "expert_load": torch.stack(loads),
        "dropped_token_fraction": torch.stack([routing.dropped_fraction for routing in routings]),
    }


class SparseBertPreTrainedModel(PreTrainedModel):
    config_class = SparseBertConfigBase
    base_model_prefix = "sparse_bert"
    supports_gradient_checkpointing = True
    _no_split_modules = ["SparseBertLayer"]
    _supports_sdpa = True
    _supports_attention_backend = True
    # Head losses are per-batch means, so Trainer scales them for gradient accumulation itself.
    accepts_loss_kwargs = False

    if not hasattr(PreTrainedModel, "activation_checkpointing_enable"):
        # Layers return their routing (balance loss included) next to the hidden states, and reentrant checkpointing
        # would detach it: non-reentrant by default, as transformers 5 (which renames the method) already does.
        def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None) -> None:
            kwargs = {"use_reentrant": False, **(gradient_checkpointing_kwargs or {})}
            super().gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Initialize every parameter and buffer a checkpoint does not hold: transformers 5 materializes a loaded
        model from the meta device and leaves the rest (non-persistent buffers included) uninitialized otherwise;
        4.57 initializes only modules with missing weights. A task head added to a saved base model relies on it."""
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, SparseBertExpertLinear)):
            init_unless_loaded(module.weight, std=std)
            if module.bias is not None:
                init_unless_loaded(module.bias, value=0.0)
        elif isinstance(module, nn.Embedding):
            if not getattr(module.weight, "_is_hf_initialized", False):
                module.weight.normal_(mean=0.0, std=std)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            init_unless_loaded(module.weight, value=1.0)
            init_unless_loaded(module.bias, value=0.0)
        elif isinstance(module, SparseBertExperts):
            for name in ("up_proj", "down_proj"):
                init_unless_loaded(getattr(module, name), std=std)
                init_unless_loaded(getattr(module, f"{name}_bias"), value=0.0)
        elif isinstance(module, SparseBertLMPredictionHead):
            init_unless_loaded(module.bias, value=0.0)
        elif isinstance(module, SparseBertRouter) and hasattr(module, "token_to_expert"):
            table = hash_routing_table(module.token_to_expert.shape[0], module.num_experts, module.hash_seed)
            init_unless_loaded(module.token_to_expert, table=table)
        elif isinstance(module, SparseBertEmbeddings):
            init_unless_loaded(module.position_ids, table=torch.arange(module.position_ids.shape[-1])[None])


class SparseBertModel(SparseBertPreTrainedModel):
    """The base model: embeddings, encoder, optional pooler. ``forward`` takes BERT's arguments, ``output_router_logits``
    and ``output_router_stats`` (the balance terms outside training, e.g. to log them in evaluation)."""

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
        output_router_stats: bool = False,
    ) -> SparseBertModelOutput:
        config = self.config
        validate_model_inputs(config, input_ids, inputs_embeds, token_type_ids, position_ids, attention_mask)
        output_attentions = config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = config.output_hidden_states if output_hidden_states is None else output_hidden_states
        try:
            hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        except IndexError:  # ids outside a table, on the CPU (an accelerator asserts on the device)
            check_id_ranges(config, input_ids, token_type_ids, position_ids)
            raise
        if attention_mask is None:
            attention_mask = torch.ones(hidden_states.shape[:2], dtype=torch.long, device=hidden_states.device)
        # [batch, seq] 1/0 → [batch, 1, 1, seq] additive: 0 keeps a key, the dtype's minimum masks it.
        dtype = hidden_states.dtype
        additive_mask = (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        last_hidden_state, all_hidden_states, all_attentions, routings = self.encoder(
            hidden_states,
            additive_mask,
            attention_mask,
            input_ids,
            output_attentions,
            output_hidden_states,
            output_router_stats,
        )
        routing = routing_outputs(routings, config, attention_mask.shape, output_router_logits) if routings else {}
        pooler_output = self.pooler(last_hidden_state) if self.pooler is not None else None
        return SparseBertModelOutput(
            last_hidden_state=last_hidden_state,
            pooler_output=pooler_output,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
            **routing,
        )


def head_output(output_class: type, loss, outputs: SparseBertModelOutput, **head_fields):
    """A head's ``output_class``: its own fields, the backbone's per-layer and routing fields, and a ``loss`` (with
    labels) that includes the backbone's weighted MoE balance loss (paper 002 uses it in fine-tuning)."""
    if loss is not None and outputs.aux_loss is not None:
        loss = loss + outputs.aux_loss.to(loss.dtype)
    names = ["hidden_states", "attentions", *(field.name for field in fields(SparseBertRoutingOutput))]
    return output_class(loss=loss, **head_fields, **{name: getattr(outputs, name) for name in names})


class SparseBertForMaskedLM(SparseBertPreTrainedModel):
    """Masked-LM head whose decoder is tied to the word embeddings; labels of -100 are ignored."""

    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "sparse_bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }

    def __init__(self, config):
        super().__init__(config)
        self.sparse_bert = SparseBertModel(config, add_pooling_layer=False)
        self.cls = SparseBertOnlyMLMHead(config)
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
    ) -> SparseBertMaskedLMOutput:
        outputs = self.sparse_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.cls(outputs.last_hidden_state)
        loss = None if labels is None else F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return head_output(SparseBertMaskedLMOutput, loss, outputs, logits=logits)


class SparseBertForSequenceClassification(SparseBertPreTrainedModel):
    """Pooled first token → dropout → linear classifier (or regressor when ``num_labels == 1``)."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.sparse_bert = SparseBertModel(config)
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
    ) -> SparseBertSequenceClassifierOutput:
        outputs = self.sparse_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None if labels is None else sequence_classification_loss(logits, labels, self.config)
        return head_output(SparseBertSequenceClassifierOutput, loss, outputs, logits=logits)


class SparseBertForTokenClassification(SparseBertPreTrainedModel):
    """Per-token dropout → linear classifier; labels of -100 are ignored."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.sparse_bert = SparseBertModel(config, add_pooling_layer=False)
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
    ) -> SparseBertTokenClassifierOutput:
        outputs = self.sparse_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None if labels is None else F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return head_output(SparseBertTokenClassifierOutput, loss, outputs, logits=logits)


class SparseBertForQuestionAnswering(SparseBertPreTrainedModel):
    """Extractive QA: per-token start/end logits; positions outside the sequence are ignored, as in BERT."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self.sparse_bert = SparseBertModel(config, add_pooling_layer=False)
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
    ) -> SparseBertQuestionAnsweringOutput:
        outputs = self.sparse_bert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(dim=-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            length = start_logits.shape[1]
            start_loss = F.cross_entropy(start_logits, start_positions.view(-1).clamp(0, length), ignore_index=length)
            end_loss = F.cross_entropy(end_logits, end_positions.view(-1).clamp(0, length), ignore_index=length)
            loss = (start_loss + end_loss) / 2
        start_logits, end_logits = start_logits.contiguous(), end_logits.contiguous()
        return head_output(
            SparseBertQuestionAnsweringOutput, loss, outputs, start_logits=start_logits, end_logits=end_logits
        )
