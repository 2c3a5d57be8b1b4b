"""The generated model code the package runs and a saved folder ships, one folder per model type.

``<model_type>/configuration_<model_type>.py`` and ``<model_type>/modeling_<model_type>.py`` are generated at
development time from the modular sources in ``configuration/`` and ``modeling/`` (``python -m utils.hub_code``;
CI fails when they differ from what the sources generate). Each imports only torch and transformers and reads top
to bottom, so the classes compact-bert exports are the classes a Hub user loads with ``trust_remote_code=True``,
and transformers' own ``register_for_auto_class`` saving copies these two files next to the weights.

Each file is an architecture written out under its family's names (``MiniMoEExperts``, ``MoEBertExperts``), as
transformers writes ``modeling_mixtral.py``: ``family_classes`` finds every family's class of one part, for the code
that recognises a part in any family's model (parameter counting, PEFT, the inference optimizer, export forms).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MODEL_TYPES", "SPARSE_MODEL_TYPES", "configuration_module", "family_classes", "modeling_module"]

MODEL_TYPES = ("ib_bert", "compact_mobilebert", "minimoe", "moe_bert")
# The model types of the sparse BERT architecture (routers and experts); the others are bottleneck BERTs.
SPARSE_MODEL_TYPES = ("minimoe", "moe_bert")
# The class-name prefix of each model type's classes.
_PREFIXES = {
    "ib_bert": "IBBert",
    "compact_mobilebert": "CompactMobileBert",
    "minimoe": "MiniMoE",
    "moe_bert": "MoEBert",
}


def configuration_module(model_type: str) -> ModuleType:
    """The generated ``configuration_<model_type>`` module."""
    return importlib.import_module(f"{__name__}.{model_type}.configuration_{model_type}")


def modeling_module(model_type: str) -> ModuleType:
    """The generated ``modeling_<model_type>`` module."""
    return importlib.import_module(f"{__name__}.{model_type}.modeling_{model_type}")


def family_classes(part: str, model_types: tuple[str, ...] = MODEL_TYPES) -> tuple[type, ...]:
    """Each family's class of ``part`` (``"Experts"`` → ``MiniMoEExperts``, ``MoEBertExperts``), for ``isinstance``;
    families without one are skipped."""
    classes = (getattr(modeling_module(model_type), _PREFIXES[model_type] + part, None) for model_type in model_types)
    return tuple(klass for klass in classes if isinstance(klass, type))
