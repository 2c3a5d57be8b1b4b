"""What both architectures' model files share, written once: the generator copies these into every family's file
(``modeling_sparse_bert.py`` and ``modeling_bottleneck_bert.py`` import them; nothing imports this at run time)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

__all__ = [
    "attention_function",
    "check_id_ranges",
    "eager_attention_forward",
    "init_unless_loaded",
    "sequence_classification_loss",
    "validate_model_inputs",
]


def eager_attention_forward(
    module: nn.Module, query, key, value, attention_mask, scaling: float, dropout=0.0, **kwargs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention written out, over ``[batch, heads, seq, head_size]`` tensors and an additive mask: the
    only path with probabilities (attention transfer, paper 001 eq. 3). Returns ``[batch, seq, heads, head_size]``."""
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = torch.softmax(weights, dim=-1)
    weights = F.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def attention_function(config, output_attentions: bool) -> Callable:
    """The attention function ``config._attn_implementation`` names in ``ALL_ATTENTION_FUNCTIONS`` (``sdpa``, what
    transformers or the user registers; they receive the ``[batch, 1, 1, seq]`` additive mask), or the eager one, also
    whenever probabilities are asked for, which fused kernels never compute."""
    if output_attentions or config._attn_implementation == "eager":
        return eager_attention_forward
    if not hasattr(ALL_ATTENTION_FUNCTIONS, "get_interface"):  # transformers 4.57: a plain mapping
        return ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    return ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, eager_attention_forward)


def _describe(tensor: torch.Tensor) -> str:
    return f"shape {tuple(tensor.shape)} and dtype {tensor.dtype}"


def _not_integer(tensor: torch.Tensor) -> bool:
    return tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype is torch.bool


def validate_model_inputs(
    config, input_ids, inputs_embeds, token_type_ids=None, position_ids=None, attention_mask=None
) -> None:
    """Fail naming the argument, its shape and dtype and what was expected, instead of an error deep inside
    ``forward``. Reads metadata only, so nothing waits on an accelerator (the ids' values: ``check_id_ranges``)."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
    name, inputs = ("input_ids", input_ids) if input_ids is not None else ("inputs_embeds", inputs_embeds)
    if input_ids is not None and (inputs.dim() != 2 or _not_integer(inputs)):
        raise ValueError(f"`input_ids` must be integer token ids [batch, sequence], got {_describe(inputs)}.")
    if input_ids is None and (inputs.dim() != 3 or not inputs.dtype.is_floating_point):
        raise ValueError(f"`inputs_embeds` must be floating point [batch, sequence, width], got {_describe(inputs)}.")
    shape = tuple(inputs.shape[:2])
    if 0 in shape:
        raise ValueError(
            f"`{name}` of shape {shape} holds no token: a tokenizer adds [CLS] and [SEP] even to no text."
        )
    width = getattr(config, "embedding_size", config.hidden_size)
    if input_ids is None and inputs.shape[2] != width:
        raise ValueError(
            f"`inputs_embeds` must be {width} wide (the model's word embeddings), got {_describe(inputs)}."
        )
    if shape[1] > config.max_position_embeddings:
        raise ValueError(
            f"`{name}` has {shape[1]} positions but `max_position_embeddings` is {config.max_position_embeddings}."
        )
    for companion, tensor, integer_ids in (
        ("token_type_ids", token_type_ids, True),
        ("position_ids", position_ids, True),
        ("attention_mask", attention_mask, False),
    ):
        shapes = [shape, (1, shape[1])] if companion == "position_ids" else [shape]
        if tensor is not None and (tuple(tensor.shape) not in shapes or (integer_ids and _not_integer(tensor))):
            wanted = " or ".join(str(list(item)) for item in shapes)
            values = "an integer dtype" if integer_ids else "1 / 0 values"
            raise ValueError(
                f"`{companion}` must have shape {wanted} (the inputs' [batch, sequence]) and {values}; "
                f"got {_describe(tensor)}."
            )


def check_id_ranges(config, input_ids, token_type_ids, position_ids) -> None:
    """Raise naming the ids outside their embedding table. It reads them on the host, so models call it only after
    torch's anonymous ``IndexError`` (on the CPU; an accelerator asserts on the device, as with transformers' BERT)."""
    for name, ids, size_field in (
        ("input_ids", input_ids, "vocab_size"),
        ("token_type_ids", token_type_ids, "type_vocab_size"),
        ("position_ids", position_ids, "max_position_embeddings"),
    ):
        size = getattr(config, size_field)
        if ids is not None and bool(((ids < 0) | (ids >= size)).any()):
            raise ValueError(
                f"`{name}` must lie in [0, {size}) (the model's `{size_field}`), got values from {int(ids.min())} to "
                f"{int(ids.max())}: is the tokenizer the one this model was trained with?"
            )


def init_unless_loaded(tensor: torch.Tensor, std=None, value=None, table=None) -> None:
    """Initialize ``tensor`` (normal with ``std``, filled with ``value`` or copied from ``table``) unless transformers 5
    flagged it as filled from the checkpoint."""
    if getattr(tensor, "_is_hf_initialized", False):
        return
    if std is not None:
        tensor.normal_(mean=0.0, std=std)
    elif table is not None:
        tensor.copy_(table.expand_as(tensor))
    else:
        tensor.fill_(value)


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config) -> torch.Tensor:
    """Regression (MSE), single-label (cross-entropy) or multi-label (BCE), decided as transformers decides."""
    problem_type = config.problem_type
    if problem_type is None:
        if config.num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1), labels.squeeze(-1).to(logits.dtype))
    if problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
