"""The one line of Python that loads a saved folder, as run summaries and the closing tables print it.

A folder that ships its own model code (``auto_map`` in ``config.json``: compact-bert's mixture-of-experts and paper
families) needs ``trust_remote_code=True``; a plain transformers folder (a dense student is transformers' BERT) does
not, and printing the flag for it would teach users to trust code that is not there.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["load_call", "needs_remote_code"]


def needs_remote_code(folder: str | Path) -> bool:
    """Whether ``folder``'s ``config.json`` names its own classes (``auto_map``); for a sentence-transformers folder,
    the transformer module's config (the folder itself, or the subfolder its first module names)."""
    folder = Path(folder)
    config = folder / "config.json"
    if not config.is_file():
        return False
    try:
        return bool(json.loads(config.read_text(encoding="utf-8")).get("auto_map"))
    except (OSError, ValueError):
        return False


def load_call(callable_name: str, folder: str | Path, remote_code: bool | None = None) -> str:
    """``callable_name(<absolute folder>[, trust_remote_code=True])``, e.g. for
    ``transformers.AutoModelForSequenceClassification.from_pretrained`` or ``sentence_transformers.SentenceTransformer``;
    ``remote_code`` says it for a folder not yet written (default: read from the folder)."""
    remote_code = needs_remote_code(folder) if remote_code is None else remote_code
    remote = ", trust_remote_code=True" if remote_code else ""
    return f"{callable_name}({str(Path(folder).resolve())!r}{remote})"
