"""Refuse float16 training of models whose activations do not fit in float16.

MobileBERT's NoNorm (``γ∘h + β``, eq. 1 of the paper, ``normalization_type="no_norm"``) does not rescale the
residual stream the way LayerNorm does. Once a model is trained, its activations reach about 1e7, far past
float16's largest value (65504): under ``--fp16`` autocast the forward pass returns inf, then NaN, and the loss
scaler only hides it by skipping steps. bfloat16 has float32's range, so ``--bf16`` is safe; LayerNorm variants
(``mobilebert-wo-opt``, IB-BERT with ``normalization_type="layer_norm"``) train in float16 like BERT.
"""

from __future__ import annotations

__all__ = ["UnsupportedPrecisionError", "check_precision_supported"]


class UnsupportedPrecisionError(ValueError):
    """The requested mixed precision cannot represent the model's activations."""


def check_precision_supported(args, **models) -> None:
    """Raise ``UnsupportedPrecisionError`` when ``--fp16`` or ``--fp16_full_eval`` is set and one of ``models``
    (by role: ``model=``, ``teacher=``; the teacher runs under the same autocast) uses NoNorm."""
    flag = next((name for name in ("fp16", "fp16_full_eval") if getattr(args, name, False)), None)
    if flag is None:
        return
    for role, model in models.items():
        config = getattr(model, "config", None)
        if getattr(config, "normalization_type", None) == "no_norm":
            raise UnsupportedPrecisionError(
                f"--{flag} is not supported for the {role} ({type(model).__name__}, {config.model_type} with "
                "`normalization_type='no_norm'`): NoNorm activations of a trained model reach about 1e7, beyond "
                "float16's largest value 65504, so outputs become inf/NaN. Use --bf16 true (same range as float32) "
                "or train in float32; a model with `normalization_type='layer_norm'` may use --fp16."
            )
