"""Teachers from anywhere: our models, any transformers BERT-like encoder, or the packaged MiniLM.

Distillation reads a teacher only through hooks on submodules that every BERT-like encoder names alike
(``encoder.layer.<i>.attention.self.query`` ...; see ``modeling.signals``), so BertModel, RobertaModel,
transformers' MobileBertModel and our families all work unchanged.
"""

from __future__ import annotations

from pathlib import Path

import transformers

from ..modeling.signals import signal_module_name
from ..training.compat import FROM_PRETRAINED_KWARGS
from ..training.run_errors import RunSettingsError
from .data import PACKAGED_TEACHER, packaged_teacher_dir

__all__ = ["load_encoder", "relation_module_names", "resolve_layer", "resolve_model_path"]


def resolve_model_path(name_or_path: str) -> Path:
    """A model folder, or the short name of the packaged teacher (``all-MiniLM-L6-v2``)."""
    if name_or_path == PACKAGED_TEACHER:
        return packaged_teacher_dir()
    path = Path(name_or_path)
    if not (path / "config.json").is_file():
        raise RunSettingsError(
            f"Teacher {name_or_path!r} is neither a model folder (no config.json there) nor the packaged "
            f"teacher's short name {PACKAGED_TEACHER!r}."
        )
    return path


def load_encoder(name_or_path: str) -> transformers.PreTrainedModel:
    """The base encoder of a checkpoint (heads dropped): what relation distillation reads."""
    from ..training.checked_loading import load_checked

    return load_checked(
        transformers.AutoModel, resolve_model_path(name_or_path), "--teacher", **FROM_PRETRAINED_KWARGS
    )


def resolve_layer(layer: int, num_layers: int, role: str) -> int:
    """Python-style layer index (-1 = last) → 0-based index, with a clear error when out of range."""
    resolved = layer + num_layers if layer < 0 else layer
    if not 0 <= resolved < num_layers:
        raise RunSettingsError(f"`{role}` {layer} is out of range for a model with {num_layers} layers.")
    return resolved


def relation_module_names(layer: int | str) -> dict[str, str]:
    """Submodule names of the query, key and value projections of ``layer`` (or ``"auxiliary"``)."""
    return {name: signal_module_name(name, layer) for name in ("query", "key", "value")}
