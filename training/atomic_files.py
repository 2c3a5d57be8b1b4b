"""Files that are either complete or absent: written to a temporary file beside them, flushed, then renamed.

A full disk or a kill in the middle of ``Path.write_text`` leaves a truncated or 0-byte file where the old one was
(a ``run_summary.json`` that later crashes ``push`` with a bare ``JSONDecodeError``). ``os.replace`` within one
folder is atomic on POSIX and Windows: readers see the old file or the new one, never a part.

The temporary file is created private (``mkstemp``: mode 0600); the finished file gets the mode ``open()`` and
transformers' ``save_pretrained`` give a new file (0666 less the process's umask), so that the other users of a shared
model folder can read its card and summary as they read its weights.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomically"]


def write_text_atomically(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to a temporary file next to ``path`` and rename it over ``path``: a reader sees the old file or
    the new one, never half of one. A failed write (a full disk, a read-only folder) leaves ``path`` as it was and
    raises an ``OSError`` that names ``path``."""
    path = Path(path)
    try:
        _write_and_replace(path, text, encoding)
    except OSError as error:
        if error.filename is not None and str(path) in str(error.filename):
            raise
        raise OSError(
            error.errno, f"{error.strerror or error} (writing it; it is left as it was)", str(path)
        ) from error


def _write_and_replace(path: Path, text: str, encoding: str) -> None:
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):  # POSIX; on Windows the mode bits carry no read permission for others anyway
            os.fchmod(descriptor, _mode_of_new_files())
        with os.fdopen(descriptor, "w", encoding=encoding, newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _mode_of_new_files() -> int:
    """0666 less the umask. The umask can only be read by setting it, so it is set back at once."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask
