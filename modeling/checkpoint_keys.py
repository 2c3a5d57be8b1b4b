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


def _weight_renaming_class() -> type:
    """transformers 5's class of checkpoint-key renames, or ``object`` on 4.57, which registers none."""
    try:
        from transformers.core_model_loading import WeightRenaming
    except ImportError:
        return object
    return WeightRenaming


_WeightRenaming = _weight_renaming_class()


class LegacyKeyRenaming(_WeightRenaming):
    """A rename that transformers 5 applies when loading; its reverse, applied when saving, renames today's name to
    itself. A plain ``WeightRenaming`` would be reversed too: on a model created from a config, transformers reverses
    every mapping registered for its type, so the router would be saved as ``router.classifier``.

    Defined at module level so that a model loaded from a legacy checkpoint, which keeps its conversions, pickles.
    The reverse is built with the constructor alone (no ``copy``), which every 5.x release has."""

    __slots__ = ()

    def reverse_transform(self):
        current = getattr(self, "_original_target_patterns", None) or self.target_patterns
        current = list(current) if isinstance(current, (list, tuple)) else [current]
        reverse = _WeightRenaming(source_patterns=current, target_patterns=list(current))
        for name in ("scope_prefix", "base_model_prefix"):
            if hasattr(self, name):
                setattr(reverse, name, getattr(self, name))
        return reverse


def register_legacy_checkpoint_keys(model_type: str) -> None:
    """Register the renames for ``model_type`` with transformers 5 (a no-op on 4.57, which has no registry).

    The registry is per model type: in a process that imported this code, a ``moe_bert`` / ``minimoe`` class of
    another origin (remote code saved before 0.2, whose routers were still named ``classifier``) is renamed too and
    would load without its routers; re-save such a folder with this release."""
    try:
        from transformers.conversion_mapping import register_checkpoint_conversion_mapping
    except ImportError:
        return
    renamings = [LegacyKeyRenaming(pattern, replacement) for pattern, replacement in LEGACY_CHECKPOINT_KEYS.items()]
    register_checkpoint_conversion_mapping(model_type, renamings, overwrite=True)
