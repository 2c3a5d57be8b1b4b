"""The committed remote-code files against what the sources generate: which are stale, and rewriting them.

Every model type of ``compact_bert.modeling.AUTO_CLASSES_BY_CONFIG`` has a folder
``modeling/remote_code/<model_type>/`` with its ``configuration_<model_type>.py`` and ``modeling_<model_type>.py``;
nothing else lives there, so a file of a removed family shows up as stale too.
"""

from __future__ import annotations

from pathlib import Path

from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from compact_bert.modeling.hub_saving import REMOTE_CODE_ROOT

from .bundler import bundle_remote_code

__all__ = ["expected_files", "stale_files", "write_files"]


def expected_files() -> dict[Path, str]:
    """Path under ``modeling/remote_code/`` → text the sources generate, for every model type."""
    files = {}
    for config_class, auto_classes in AUTO_CLASSES_BY_CONFIG.items():
        folder = REMOTE_CODE_ROOT / config_class.model_type
        for name, text in bundle_remote_code(auto_classes["AutoModel"]).items():
            files[folder / name] = text
    return files


def stale_files(expected: dict[Path, str] | None = None) -> list[str]:
    """Files that differ from what the sources generate (``expected``, generated when not given), are missing,
    or have no source any more."""
    expected = expected_files() if expected is None else expected
    stale = [
        str(path.relative_to(REMOTE_CODE_ROOT.parent.parent))
        for path, text in sorted(expected.items())
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    stale += [
        f"{path.relative_to(REMOTE_CODE_ROOT.parent.parent)} (no family generates it)"
        for path in sorted(REMOTE_CODE_ROOT.rglob("*.py"))
        if path not in expected
    ]
    return stale


def write_files() -> list[str]:
    """Rewrite every stale file (removing those no family generates); the files that changed."""
    expected = expected_files()
    changed = stale_files(expected)
    for path in sorted(REMOTE_CODE_ROOT.rglob("*")):
        if path.is_file() and path not in expected:
            path.unlink()
    for path, text in expected.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for folder in sorted(REMOTE_CODE_ROOT.iterdir(), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return changed
