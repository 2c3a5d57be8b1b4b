"""A model's shape in words — one wording for the depth budget's reasons, the main job's report and the model card.

A preset's name says the shape it was built with; ``--max_latency_ratio`` and overrides change it, so what a user
reads is written from the config's own fields: "3 layers of 288 channels, 9 heads and 576 FFN neurons" (a count
of one is singular: "1 layer of 32 channels, 1 head and 64 FFN neurons").
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["counted", "describe_shape", "describe_width"]


def counted(number: int, noun: str) -> str:
    """``1 layer``, ``3 layers``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def describe_width(width: Mapping) -> str:
    """``320 channels, 10 heads and 640 FFN neurons``; with more than one expert (``num_experts`` and
    ``moe_intermediate_size`` in ``width``), ``... and 4 experts of 96 FFN neurons``. ``width``: a config's fields
    (``config.to_dict()``) or a ``depth_budget.narrowed_shapes`` entry."""
    text = f"{width['hidden_size']} channels, {counted(width['num_attention_heads'], 'head')}"
    experts = width.get("num_experts") or 1
    if experts > 1 and width.get("moe_intermediate_size"):
        return f"{text} and {experts} experts of {width['moe_intermediate_size']} FFN neurons"
    return f"{text} and {width['intermediate_size']} FFN neurons"


def describe_shape(depth: int, width: Mapping) -> str:
    """``3 layers of 320 channels, 10 heads and 640 FFN neurons``."""
    return f"{counted(depth, 'layer')} of {describe_width(width)}"
