"""Writing a model folder fails with the folder and the cause named, not with a library's internal message.

When the disk fills up while a checkpoint or the final model is written, the error that reaches the user comes
from deep inside the writer: torch's zip writer says ``unexpected pos 8384 vs 8276``, safetensors says
``IoError(Os { code: 28, kind: StorageFull, ... })``. Neither names the folder nor says that the disk is full.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from pathlib import Path

from .run_errors import RunSettingsError

__all__ = ["OutputWriteError", "explain_write_errors"]

_DISK_FULL_ERRNOS = {errno.ENOSPC: "the disk is full (no space left on device)"}
if hasattr(errno, "EDQUOT"):
    _DISK_FULL_ERRNOS[errno.EDQUOT] = "the disk quota is exceeded"
_DISK_FULL_MESSAGES = ("No space left on device", "StorageFull", "Disk quota exceeded", "QuotaExceeded")


class OutputWriteError(RunSettingsError, OSError):
    """A file of a model folder, checkpoint or summary could not be written; the message names the folder."""


def _free_space(folder: Path) -> str:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return "unknown"
    return f"{free / 2**20:.1f} MiB"


def _cause(error: BaseException) -> str | None:
    """Why writing failed, in words, when ``error`` is a full disk or a file written only in part; else None."""
    if isinstance(error, OSError) and error.errno in _DISK_FULL_ERRNOS:
        return _DISK_FULL_ERRNOS[error.errno]
    text = str(error)
    if any(marker in text for marker in _DISK_FULL_MESSAGES):
        return "the disk is full (no space left on device)"
    if isinstance(error, RuntimeError) and "unexpected pos" in text:
        # torch's PytorchStreamWriter checks the file position after each write: a short write (full disk,
        # exceeded quota) shows up as this mismatch.
        return "a file was written only in part (torch reports 'unexpected pos'), which happens when the disk is full"
    return None


@contextlib.contextmanager
def explain_write_errors(folder: str | Path, action: str = "Writing"):
    """Re-raise a full-disk error (or torch's short-write error) met inside the block as an
    ``OutputWriteError`` naming ``folder``, the cause and the free space left; other errors pass unchanged."""
    try:
        yield
    except OutputWriteError:
        raise
    except Exception as error:  # safetensors' SafetensorError derives from Exception only
        cause = _cause(error)
        if cause is None:
            raise
        folder = Path(folder)
        raise OutputWriteError(
            f"{action} {folder} failed: {cause}; free space there now: {_free_space(folder)}. Free some space or "
            f"choose another --output_dir, then resume from the last complete checkpoint "
            f"(--resume_from_checkpoint last) if there is one. Original error: {type(error).__name__}: {error}"
        ) from error
