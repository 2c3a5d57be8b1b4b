"""The committed generated files against what the sources generate: which are stale, and rewriting them.

Every model type of ``MODULAR_SOURCES`` has a folder ``models/<model_type>/`` with its
``configuration_<model_type>.py`` and ``modeling_<model_type>.py``; nothing else lives there (but the package's
``models/__init__.py``), so a file of a removed family shows up as stale too.
"""

from __future__ import annotations

from pathlib import Path

from .bundler import bundle_remote_code
from .sources import import_source

__all__ = ["MODELS_ROOT", "MODULAR_SOURCES", "expected_files", "family_files", "stale_files", "write_files"]

# The folder of the generated files, one subfolder per model type (package data of the wheel).
MODELS_ROOT = Path(__file__).resolve().parents[2] / "models"
# model_type → its modular source: the architecture, the config class and the renames its files are generated with.
MODULAR_SOURCES = {
    "ib_bert": "compact_bert.modeling.modular_ib_bert",
    "compact_mobilebert": "compact_bert.modeling.modular_compact_mobilebert",
    "minimoe": "compact_bert.modeling.modular_minimoe",
    "moe_bert": "compact_bert.modeling.modular_moe_bert",
}


def family_files(model_type: str) -> dict[str, str]:
    """File name → text of ``model_type``'s two generated files, from its modular source (imported as a source,
    ``sources.import_source``)."""
    source = import_source(MODULAR_SOURCES[model_type])
    return bundle_remote_code(source.ARCHITECTURE, source.CONFIG_CLASS, source.RENAMES)


def expected_files() -> dict[Path, str]:
    """Path under ``models/`` → text the sources generate, for every model type."""
    files = {}
    for model_type in MODULAR_SOURCES:
        for name, text in family_files(model_type).items():
            files[MODELS_ROOT / model_type / name] = text
    return files


def _generated_paths() -> list[Path]:
    return sorted(path for path in MODELS_ROOT.glob("*/*") if path.is_file() and "__pycache__" not in path.parts)


def stale_files(expected: dict[Path, str] | None = None) -> list[str]:
    """Files that differ from what the sources generate (``expected``, generated when not given), are missing,
    or have no source any more."""
    expected = expected_files() if expected is None else expected
    stale = [
        str(path.relative_to(MODELS_ROOT.parent))
        for path, text in sorted(expected.items())
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    stale += [
        f"{path.relative_to(MODELS_ROOT.parent)} (no family generates it)"
        for path in _generated_paths()
        if path.suffix == ".py" and path not in expected
    ]
    return stale


def write_files() -> list[str]:
    """Rewrite every stale file (removing those no family generates); the files that changed."""
    expected = expected_files()
    changed = stale_files(expected)
    for path in _generated_paths():
        if path not in expected:
            path.unlink()
    for path, text in expected.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for folder in sorted(MODELS_ROOT.iterdir(), reverse=True):
        if folder.is_dir() and folder.name != "__pycache__" and not any(folder.iterdir()):
            folder.rmdir()
    return changed
