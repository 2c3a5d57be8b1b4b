"""Generate and check the committed Hub remote-code files of every model family (``python -m utils.hub_code``)."""

from __future__ import annotations

from .bundler import GENERATED_HEADER, RemoteCodeError, bundle_remote_code
from .committed import expected_files, stale_files, write_files

__all__ = ["GENERATED_HEADER", "RemoteCodeError", "bundle_remote_code", "expected_files", "stale_files", "write_files"]
