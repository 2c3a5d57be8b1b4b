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
    "validate_model_inputs",
    "eager_attention_forward",
    "init_unless_loaded",
    "sequence_classification_loss",
]


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
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
    """The attention implementation ``config._attn_implementation`` names in transformers' registry
    (``ALL_ATTENTION_FUNCTIONS``: ``sdpa``, and what the installed transformers or the user registers), or
    ``eager_attention_forward``; always the latter when probabilities are asked for, which fused kernels never
    compute. Registered functions receive the ``[batch, 1, 1, seq]`` additive padding mask."""
    if output_attentions or config._attn_implementation == "eager":
        return eager_attention_forward
    if not hasattr(ALL_ATTENTION_FUNCTIONS, "get_interface"):  # transformers 4.57: a plain mapping
        return ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    return ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, eager_attention_forward)


def _is_integer_dtype(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex and dtype is not torch.bool


def _describe(tensor: torch.Tensor) -> str:
    return f"shape {tuple(tensor.shape)} and dtype {tensor.dtype}"


def _check_companion(name: str, tensor, shape, integer_ids: bool, broadcast_batch: bool = False) -> None:
    """``tensor`` (an input beside the ids) must have the ids' ``[batch, sequence]`` shape (``[1, sequence]`` too
    where ``broadcast_batch``) and, for ids, an integer dtype; read from metadata only, no device sync."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"`{name}` must be a tensor, got {type(tensor).__name__}.")
    shapes = [tuple(shape)] + ([(1, shape[1])] if broadcast_batch else [])
    dtype = tensor.dtype
    if tuple(tensor.shape) not in shapes or (
        integer_ids and (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool)
    ):
        wanted = " or ".join(str(list(item)) for item in shapes)
        allowed = "an integer dtype" if integer_ids else "a bool, integer or floating dtype of 1 / 0"
        raise ValueError(
            f"`{name}` must have shape {wanted} ([batch, sequence], as the inputs) and {allowed}; "
            f"got {_describe(tensor)}."
        )


def validate_model_inputs(
    config, input_ids, inputs_embeds, token_type_ids=None, position_ids=None, attention_mask=None
) -> None:
    """Fail naming the argument, its shape and dtype and what was expected, instead of a shape error or an
    ``IndexError`` deep inside ``forward``. Shapes and dtypes are checked from metadata; the ids' range is read on
    the host on CPU only, and not while tracing; on an accelerator that check is queued on the device
    (``torch._assert_async``) instead of making every call wait for it."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
    if input_ids is not None and not _is_integer_dtype(input_ids.dtype):
        raise ValueError(
            f"`input_ids` must be integer token ids (torch.long), got {_describe(input_ids)}: floats would be "
            "truncated to ids; pass the tokenizer's output, or embeddings as `inputs_embeds`."
        )
    if inputs_embeds is not None and not inputs_embeds.dtype.is_floating_point:
        raise ValueError(
            f"`inputs_embeds` must be floating point [batch, sequence, width], got {_describe(inputs_embeds)}."
        )
    shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:-1]
    if len(shape) != 2:
        raise ValueError(f"Inputs must be [batch, sequence], got shape {tuple(shape)}.")
    for name, tensor, integer_ids in (
        ("token_type_ids", token_type_ids, True),
        ("position_ids", position_ids, True),
        ("attention_mask", attention_mask, False),
    ):
        if tensor is not None:  # one call per given input: this runs on every forward
            _check_companion(name, tensor, shape, integer_ids, broadcast_batch=name == "position_ids")
    if 0 in shape:
        raise ValueError(
            f"Inputs of shape {tuple(shape)} hold no token: every sequence needs at least one token (a tokenizer "
            "adds [CLS] and [SEP] even to an empty text)."
        )
    limit = config.max_position_embeddings
    if shape[1] > limit:
        raise ValueError(
            f"Sequence length {shape[1]} exceeds `max_position_embeddings` ({limit}) of this model; "
            f"truncate inputs to at most {limit} tokens."
        )
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return
    for name, ids, size_field in (
        ("input_ids", input_ids, "vocab_size"),
        ("token_type_ids", token_type_ids, "type_vocab_size"),
        ("position_ids", position_ids, "max_position_embeddings"),
    ):
        if ids is None or ids.numel() == 0:
            continue
        size = getattr(config, size_field)
        if ids.device.type != "cpu":
            torch._assert_async(
                ((ids >= 0) & (ids < size)).all(),
                f"`{name}` must lie in [0, {size}) (the model's `{size_field}`): is the tokenizer the one this "
                "model was trained with?",
            )
        else:
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= size:
                raise ValueError(
                    f"`{name}` must lie in [0, {size}) (the model's `{size_field}`), got values from {low} to "
                    f"{high}: is the tokenizer the one this model was trained with?"
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
