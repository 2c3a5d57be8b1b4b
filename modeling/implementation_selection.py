"""Select a model's dense and expert implementations for a block of code.

The fields live on the config (``dense_implementation``, ``moe_implementation``) that every module of a model
shares, so setting them switches the whole model at once, and the next forward pass uses the new choice. This
context manager sets them for the calls inside a ``with`` block and restores them after, also after an error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

from .dense_implementations import ALL_DENSE_IMPLEMENTATIONS
from .moe_implementations import ALL_MOE_IMPLEMENTATIONS

__all__ = ["selected_implementations"]

_INTERFACES = {interface.config_field: interface for interface in (ALL_DENSE_IMPLEMENTATIONS, ALL_MOE_IMPLEMENTATIONS)}


@contextlib.contextmanager
def selected_implementations(
    model: nn.Module, *, dense: str | None = None, moe: str | None = None, missing_ok: bool = False
) -> Iterator[None]:
    """Within the block, ``model`` computes its dense projections with ``dense`` and its experts with ``moe``
    (``None``: unchanged). ``missing_ok``: a model without the field (a transformers BERT teacher) is left as is
    instead of failing."""
    config = getattr(model, "config", None)
    requested = {"dense_implementation": dense, "moe_implementation": moe}
    previous = {}
    for field, name in requested.items():
        if name is None:
            continue
        if not hasattr(config, field):
            if missing_ok:
                continue
            raise ValueError(f"{type(model).__name__} has no `{field}` to select: it is not a compact-bert model.")
        _INTERFACES[field].get_interface(name)  # a clear error for a name that is not registered
        previous[field] = getattr(config, field)
    try:
        for field in previous:
            setattr(config, field, requested[field])
        yield
    finally:
        for field, name in previous.items():
            setattr(config, field, name)
