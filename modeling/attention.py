"""Scaled dot-product attention shared by every family.

Two implementations, chosen the way transformers users expect (``attn_implementation`` in
``from_pretrained`` / ``from_config``, stored as ``config._attn_implementation``): PyTorch's fused SDPA
kernel (the default) and the explicit "eager" computation. The probabilities exist only on the eager
path, so ``output_attentions=True`` (attention transfer, eq. 3 of paper 001) uses it whatever is selected.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

__all__ = [
    "additive_attention_mask",
    "merge_heads",
    "scaled_dot_product_attention",
    "split_heads",
    "uses_eager_attention",
]


def additive_attention_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``[batch, seq]`` 1/0 padding mask → ``[batch, 1, 1, seq]`` additive mask (0 keeps, dtype-min masks)."""
    if attention_mask is None:
        return None
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


def split_heads(states: torch.Tensor, num_heads: int) -> torch.Tensor:
    batch, seq, width = states.shape
    return states.view(batch, seq, num_heads, width // num_heads).transpose(1, 2)


def merge_heads(states: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, head_size = states.shape
    return states.transpose(1, 2).reshape(batch, seq, heads * head_size)


def uses_eager_attention(config, output_attentions: bool) -> bool:
    """The explicit path when probabilities are requested or ``attn_implementation="eager"`` is selected."""
    return output_attentions or getattr(config, "_attn_implementation", None) == "eager"


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    additive_mask: torch.Tensor | None,
    dropout_p: float,
    eager: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention over ``[batch, heads, seq, head_size]`` tensors; returns the context and, on the eager
    path, the probabilities (``None`` from the fused kernel).

    ``dropout_p`` must already be 0 outside training.
    """
    if not eager:
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=additive_mask, dropout_p=dropout_p)
        return context, None
    scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(query.shape[-1])
    if additive_mask is not None:
        scores = scores + additive_mask
    probs = torch.softmax(scores, dim=-1)
    context = torch.matmul(F.dropout(probs, p=dropout_p, training=dropout_p > 0), value)
    return context, probs
