"""Building a job's model: a preset freshly initialized, or a saved folder loaded with the first head class that fits."""

from __future__ import annotations

from pathlib import Path

from ..configuration import PRESETS, preset_config
from ..training.checked_loading import load_checked
from ..training.compat import FROM_PRETRAINED_KWARGS
from ..training.text_files import parse_json_object

__all__ = ["build_from_preset", "load_pretrained"]


def build_from_preset(preset: str, overrides_json: dict | str, field: str, auto_class, teacher_config=None):
    """A freshly initialized model of ``preset`` with ``overrides`` applied (a dense one as ``teacher_config``'s
    architecture: ``configuration.dense_students``); bad fields fail here."""
    if preset not in PRESETS:
        raise SystemExit(f"Unknown preset {preset!r}; valid presets: {', '.join(sorted(PRESETS))}.")
    overrides = overrides_json if isinstance(overrides_json, dict) else parse_json_object(overrides_json, field)
    try:
        config = preset_config(preset, teacher_config=teacher_config, **overrides)
    except ValueError as error:
        raise SystemExit(f"--{field}: {error}") from None
    return auto_class.from_config(config)


def load_pretrained(path: str, auto_classes: tuple, role: str):
    """The first of ``auto_classes`` that can load ``path`` (e.g. pre-training head, else masked LM)."""
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise SystemExit(f"--{role}: {folder} is not a model folder (no config.json).")
    errors = []
    for auto_class in auto_classes:
        try:
            return load_checked(auto_class, folder, f"--{role}", **FROM_PRETRAINED_KWARGS)
        except (ValueError, KeyError) as error:
            errors.append(f"{auto_class.__name__}: {error}")
    raise SystemExit(f"--{role}: cannot load {folder}: " + " | ".join(errors))
