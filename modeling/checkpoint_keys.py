"""Checkpoint keys of earlier releases, renamed on load through each transformers line's own mechanism.

The learned router's linear map was ``router.classifier`` before 0.2, when it became ``router.gate`` (a name
PEFT does not take for a task head). Checkpoints saved before then must still load, and a model saves today's
names whatever it was loaded from.

- transformers 5 renames keys through conversion mappings registered per model type
  (``register_checkpoint_conversion_mapping``; custom code is included when its model type was registered).
  It reverses a model's mappings when saving, so the renaming registered here saves today's names again.
- transformers 4.57 renames keys through the class's ``_fix_state_dict_key_on_load``, which
  ``SparseBertPreTrainedModel`` extends with ``renamed_legacy_key``.
- ``torch.nn.Module.load_state_dict`` (e.g. a Trainer resuming a checkpoint) goes through the router's
  ``load_state_dict`` pre-hook (``moe_layer``).
"""

from __future__ import annotations

import re

__all__ = ["LEGACY_CHECKPOINT_KEYS", "register_legacy_checkpoint_keys", "renamed_legacy_key"]

# Regular expression on a checkpoint key → replacement (transformers' ``key_mapping`` form).
LEGACY_CHECKPOINT_KEYS = {r"router\.classifier\.": "router.gate."}


def renamed_legacy_key(key: str) -> str:
    """``key`` with the first matching legacy pattern replaced (``key`` itself when none matches)."""
    for pattern, replacement in LEGACY_CHECKPOINT_KEYS.items():
        renamed, count = re.subn(pattern, replacement, key, count=1)
        if count:
            return renamed
    return key


def register_legacy_checkpoint_keys(model_type: str) -> None:
    """Register the renames for ``model_type`` with transformers 5 (a no-op on 4.57, which has no registry).

    A plain ``WeightRenaming`` would also be reversed when a model is saved: on a model created from a config,
    transformers reverses every mapping registered for its type, so the router would be saved as
    ``router.classifier``. The renaming registered here reverses to the identity: saving writes today's names.
    """
    try:
        from transformers.conversion_mapping import register_checkpoint_conversion_mapping
        from transformers.core_model_loading import WeightRenaming
    except ImportError:
        return

    class LegacyKeyRenaming(WeightRenaming):
        """Applied when loading; saving keeps the current names (its reverse renames a name to itself)."""

        __slots__ = ()

        def reverse_transform(self) -> WeightRenaming:
            return self.copy(self._original_target_patterns, self._original_target_patterns)

    renamings = [LegacyKeyRenaming(pattern, replacement) for pattern, replacement in LEGACY_CHECKPOINT_KEYS.items()]
    register_checkpoint_conversion_mapping(model_type, renamings, overwrite=True)
