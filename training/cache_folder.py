"""The folder compact-bert caches what it builds or computes once per machine (teacher logits, compiled kernels)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["compact_bert_cache_root"]


def compact_bert_cache_root() -> Path:
    """``$COMPACT_BERT_CACHE``, else ``$XDG_CACHE_HOME/compact_bert``, else ``~/.cache/compact_bert``."""
    root = os.environ.get("COMPACT_BERT_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "compact_bert"
    )
    return Path(root)
