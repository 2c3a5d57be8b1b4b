"""Files that are either complete or absent: written to a temporary file beside them, flushed, then renamed.

A full disk or a kill in the middle of ``Path.write_text`` leaves a truncated or 0-byte file where the old one was
(a ``run_summary.json`` that later crashes ``push`` with a bare ``JSONDecodeError``). ``os.replace`` within one
folder is atomic on POSIX and Windows: readers see the old file or the new one, never a part.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomically"]


def write_text_atomically(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding=encoding, newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
