"""The generated model code the package runs and a saved folder ships, one folder per model type.

``<model_type>/configuration_<model_type>.py`` and ``<model_type>/modeling_<model_type>.py`` are generated at
development time from the modular sources in ``configuration/`` and ``modeling/`` (``python -m utils.hub_code``;
CI fails when they differ from what the sources generate). Each imports only torch and transformers and reads top
to bottom, so the classes compact-bert exports are the classes a Hub user loads with ``trust_remote_code=True``,
and transformers' own ``register_for_auto_class`` saving copies these two files next to the weights.

Shared building blocks (experts, routers, the implementation registries) are written into every file that uses
them, so each family has its own copy of those classes: ``family_classes`` finds all copies of one by name, for
the code that recognises a building block in any family's model (PEFT dispatch, export forms).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MODEL_TYPES", "configuration_module", "family_classes", "modeling_module"]

MODEL_TYPES = ("ib_bert", "compact_mobilebert", "minimoe", "moe_bert")


def configuration_module(model_type: str) -> ModuleType:
    """The generated ``configuration_<model_type>`` module."""
    return importlib.import_module(f"{__name__}.{model_type}.configuration_{model_type}")


def modeling_module(model_type: str) -> ModuleType:
    """The generated ``modeling_<model_type>`` module."""
    return importlib.import_module(f"{__name__}.{model_type}.modeling_{model_type}")


def family_classes(name: str) -> tuple[type, ...]:
    """Every family's copy of the class called ``name`` (families without one are skipped), for ``isinstance``."""
    modules = [module(model_type) for model_type in MODEL_TYPES for module in (configuration_module, modeling_module)]
    return tuple(
        dict.fromkeys(module.__dict__[name] for module in modules if isinstance(module.__dict__.get(name), type))
    )
