"""Parameter and FLOP accounting for configs and models.

FLOPs count the matrix multiplications of one forward pass of the base model (embeddings, encoder,
pooler; no task head) over one sequence, a multiply-add counting as 2 — the convention of paper 001
Table 4 (BERT_BASE: 22.5B at 128 tokens). Element-wise work (normalization, activations, softmax,
routing bookkeeping) is not counted, as ``torch.utils.flop_counter.FlopCounterMode`` does not count it
either; a test checks the formula against that counter on real models.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PretrainedConfig

from ..configuration.dense_students import BERT_LAYOUT_MODEL_TYPES
from ..models import SPARSE_MODEL_TYPES, family_classes

__all__ = ["count_parameters", "estimate_flops", "meta_model"]


def meta_model(config) -> nn.Module:
    """The base model of ``config`` on the meta device: shapes only, no memory, so 3.6B costs nothing."""
    from transformers import AutoModel

    with torch.device("meta"):
        return AutoModel.from_config(config)


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """``(total, active per token)``: a top-1 MoE token uses one expert's weights out of ``num_experts``."""
    total = sum(parameter.numel() for parameter in model.parameters())
    expert_classes = family_classes("Experts") + family_classes("ExpertLinear")
    inactive = 0
    for module in model.modules():
        if isinstance(module, expert_classes):
            experts = module.num_experts
            numel = sum(parameter.numel() for parameter in module.parameters(recurse=False))
            inactive += numel * (experts - 1) // experts
    return total, total - inactive


def _bottleneck_flops(config: PretrainedConfig, n: int) -> int:
    hidden, intra, ffn = config.hidden_size, config.true_hidden_size, config.intermediate_size
    flops = 0
    if config.trigram_input or config.embedding_size != hidden:
        flops += 2 * n * config.embedding_size * (3 if config.trigram_input else 1) * hidden
    query_key_in = hidden if config.attention_input == "inter_block" else intra
    value_in = intra if config.attention_input == "intra_bottleneck" else hidden
    layer = 2 * n * intra * (2 * query_key_in + value_in)  # query, key, value projections
    layer += 2 * 2 * n * n * intra  # scores Q·Kᵀ and context P·V over all heads
    layer += 2 * n * intra * intra  # attention output dense
    layer += config.num_feedforward_networks * 2 * 2 * n * intra * ffn  # stacked FFNs
    if config.use_bottleneck:
        layer += 2 * n * hidden * intra * 2  # input bottleneck and output bottleneck
        if config.attention_input == "shared_bottleneck":
            layer += 2 * n * hidden * intra  # shared query/key bottleneck
    flops += config.num_hidden_layers * layer
    if config.classifier_activation:
        flops += 2 * hidden * hidden  # pooler on the first token
    return flops


def _sparse_flops(config: PretrainedConfig, n: int) -> int:
    """A post-LN BERT layer with top-1 experts; a dense BERT-layout encoder (no routers) is the one-expert case."""
    hidden, ffn = config.hidden_size, config.intermediate_size
    learned_router = getattr(config, "router_type", None) == "top1"
    layer = 4 * 2 * n * hidden * hidden  # Q, K, V, output: each token through one (expert) matrix
    layer += 2 * 2 * n * n * hidden  # scores and context
    experts, attention_experts = getattr(config, "num_experts", 1), getattr(config, "num_attention_experts", 1)
    if experts > 1:
        ffn = config.expert_intermediate_size
    layer += 2 * 2 * n * hidden * ffn  # FFN: each token through one expert
    if learned_router and attention_experts > 1:
        layer += 2 * n * hidden * attention_experts
    if learned_router and experts > 1:
        layer += 2 * n * hidden * experts
    return config.num_hidden_layers * layer + 2 * hidden * hidden  # + pooler


def estimate_flops(config, sequence_length: int = 128) -> int:
    """Forward FLOPs of the base model for one sequence of ``sequence_length`` tokens (see module doc)."""
    model_type = getattr(config, "model_type", None)
    if model_type in SPARSE_MODEL_TYPES or model_type in BERT_LAYOUT_MODEL_TYPES:
        return _sparse_flops(config, sequence_length)
    if model_type in ("ib_bert", "compact_mobilebert"):
        return _bottleneck_flops(config, sequence_length)
    raise TypeError(f"No FLOP formula for {type(config).__name__}; expected a compact-bert or BERT-layout config.")
