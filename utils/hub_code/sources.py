"""Import the modular sources without running the package's ``__init__`` modules.

``compact_bert/__init__.py``, ``modeling/__init__.py`` and ``configuration/__init__.py`` import the generated files,
which are stale, and may not even import, while a source is being changed (a config field the package already reads
but the committed file lacks). Generating must work from the sources alone, so they are imported as a second
package, ``compact_bert_sources``, whose packages are empty stand-ins with the real folders as their path: relative
imports between sources resolve inside it, and nothing of the installed package runs.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["PUBLISHED_PACKAGE", "SOURCE_PACKAGE", "import_source"]

PUBLISHED_PACKAGE = "compact_bert"
SOURCE_PACKAGE = "compact_bert_sources"
# The repository root is the package (docs/layout.md).
_ROOT = Path(__file__).resolve().parents[2]
_SOURCE_FOLDERS = ("configuration", "modeling")


def import_source(module_name: str) -> ModuleType:
    """The source module ``compact_bert.<subpackage>.<module>``, imported under ``compact_bert_sources``."""
    published, _, relative = module_name.partition(".")
    if published != PUBLISHED_PACKAGE or relative.split(".")[0] not in _SOURCE_FOLDERS:
        raise ValueError(f"{module_name} is not a module of compact_bert's {' or '.join(_SOURCE_FOLDERS)} sources.")
    _install_stand_in(SOURCE_PACKAGE, _ROOT)
    for folder in _SOURCE_FOLDERS:
        _install_stand_in(f"{SOURCE_PACKAGE}.{folder}", _ROOT / folder)
    return importlib.import_module(f"{SOURCE_PACKAGE}.{relative}")


def _install_stand_in(name: str, folder: Path) -> None:
    if name in sys.modules:
        return
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    sys.modules[name] = importlib.util.module_from_spec(spec)  # its ``__path__`` is the spec's search locations
