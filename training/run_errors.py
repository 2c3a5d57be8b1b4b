"""The error type of a run that the user's settings or data cannot start or finish.

The checks that run before training (flags, output folder, corpus files, a training set that cannot fill one
optimizer step) and the write errors met while saving raise it with a message that already names the flag, file
or folder and what would be valid. The ``compact-bert`` command prints that message alone and exits with status
1 (``cli/main.py``): a Python traceback would bury it and suggest a bug in compact-bert. It derives from
``ValueError`` so that library callers who catch ``ValueError`` keep working.
"""

from __future__ import annotations

__all__ = ["RunSettingsError"]


class RunSettingsError(ValueError):
    """A run cannot start or finish because of its settings or data; the message says which and how to fix it."""
