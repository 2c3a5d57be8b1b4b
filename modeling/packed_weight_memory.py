"""The memory held by a model's packed weight copies (``packed_weights``), and releasing them.

A family's generated file (``models/<model_type>/modeling_<model_type>.py``) carries the code of ``packed_weights``
with copy tables of its own, so a model's copies live in its family's tables, and a layer built from the package's
own building blocks (as the benchmarks do) keeps them in the package's. The tables are keyed by the identity of a
parameter or module, which only one of them can hold: these functions read every copy of the tables.
"""

from __future__ import annotations

from collections.abc import Iterator

from torch import nn

from ..models import MODEL_TYPES, modeling_module
from . import packed_weights

__all__ = ["packed_weight_bytes", "release_packed_weights"]


def _copy_tables() -> Iterator[tuple[dict, dict]]:
    """(parameter → packed expert copies, module → packed groups) of the package and of every family file."""
    owners = [packed_weights, *(modeling_module(model_type) for model_type in MODEL_TYPES)]
    for owner in owners:  # a family without experts ships only the groups' table
        yield getattr(owner, "_PACKED_COPIES", {}), getattr(owner, "_PACKED_GROUPS", {})


def packed_weight_bytes(model: nn.Module) -> int:
    """Bytes held by the packed copies of ``model``'s parameters (their logical size; oneDNN may pad)."""
    total = 0
    for copies, groups in _copy_tables():
        total += sum(entry.nbytes for p in model.parameters() if (entry := copies.get(p)))
        total += sum(group.nbytes for module in model.modules() for group in groups.get(module, {}).values())
    return total


def release_packed_weights(model: nn.Module) -> None:
    """Drop the packed copies of ``model``'s parameters (rebuilt on the next packed call)."""
    for copies, groups in _copy_tables():
        for parameter in model.parameters():
            copies.pop(parameter, None)
        for module in model.modules():
            groups.pop(module, None)
