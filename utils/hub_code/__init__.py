"""Generate and check the committed model code of every family, ``models/`` (``python -m utils.hub_code``)."""

from __future__ import annotations

from .bundler import GENERATED_HEADER, RemoteCodeError, bundle_remote_code
from .committed import MODELS_ROOT, MODULAR_SOURCES, expected_files, family_files, stale_files, write_files

__all__ = [
    "GENERATED_HEADER",
    "MODELS_ROOT",
    "MODULAR_SOURCES",
    "RemoteCodeError",
    "bundle_remote_code",
    "expected_files",
    "family_files",
    "stale_files",
    "write_files",
]
