"""Normalization layers: BERT's LayerNorm and MobileBERT's NoNorm (paper 001 §3.3, eq. 1)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["NoNorm", "build_normalization"]


class NoNorm(nn.Module):
    """``NoNorm(h) = γ ∘ h + β`` (eq. 1): an element-wise affine map in place of LayerNorm.

    It removes the mean/variance reductions that dominate MobileBERT's latency on phones (Table 7); the
    price is unnormalized activations (up to ~1e7), which is why fp16 overflows and bf16/fp32 are the
    supported precisions: a float16 input is refused here (``.half()``, ``dtype=torch.float16``, fp16 autocast),
    and compact-bert's trainers refuse ``--fp16`` / ``--fp16_full_eval`` before training.
    At inference it can be folded into the neighbouring linear layers.
    """

    def __init__(self, hidden_size: int, eps: float | None = None):
        super().__init__()
        # ``eps`` is accepted (and unused) so that NoNorm and LayerNorm share a constructor.
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


def build_normalization(normalization_type: str, hidden_size: int, eps: float) -> nn.Module:
    if normalization_type == "no_norm":
        return NoNorm(hidden_size)
    if normalization_type == "layer_norm":
        return nn.LayerNorm(hidden_size, eps=eps)
    raise ValueError(f"`normalization_type` must be 'no_norm' or 'layer_norm', got {normalization_type!r}.")
