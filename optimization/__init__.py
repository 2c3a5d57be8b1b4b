"""The explicit CPU fast path of compact-bert: ``optimize_for_inference(model)`` (``inference_optimizer``).

On transformers 5 the packed expert loop is also registered in transformers' experts interface as ``"onednn"``
(``ALL_EXPERTS_FUNCTIONS``), so ``from_pretrained(..., experts_implementation="onednn")`` or
``model.set_experts_implementation("onednn")`` selects it for a compact-bert MoE model once compact-bert is imported.
"""

from __future__ import annotations

from .inference_optimizer import (
    INFERENCE_OPTIMIZATIONS,
    OptimizationReport,
    optimize_for_inference,
    packed_weight_bytes,
)
from .packed_modules import onednn_experts_forward

__all__ = [
    "INFERENCE_OPTIMIZATIONS",
    "OptimizationReport",
    "onednn_experts_forward",
    "optimize_for_inference",
    "packed_weight_bytes",
    "register_experts_implementation",
]


def register_experts_implementation() -> bool:
    """Register ``onednn_experts_forward`` as ``"onednn"`` in transformers' experts interface, where the installed
    transformers has one (5.x); whether it did."""
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError:
        return False
    ALL_EXPERTS_FUNCTIONS.register("onednn", onednn_experts_forward)
    return True


register_experts_implementation()
