"""The registry behind each config-selected implementation field (``dense_implementation``, ``moe_implementation``).

transformers' ``GeneralInterface`` (a name → function mapping that ``register`` extends library-wide), with the lookup
the modeling code makes on every call: one that fails naming the config field and the registered names.
"""

from __future__ import annotations

from transformers.utils.generic import GeneralInterface

__all__ = ["ImplementationInterface"]


class ImplementationInterface(GeneralInterface):
    """Name → implementation for the config field ``config_field``; ``register(name, implementation)`` adds one."""

    config_field = ""

    def get_interface(self, name: str):
        implementation = self._local_mapping.get(name) or self._global_mapping.get(name)
        if implementation is None:
            raise ValueError(
                f"`{self.config_field}={name!r}` is not a registered implementation; valid: {', '.join(sorted(self))}."
            )
        return implementation
