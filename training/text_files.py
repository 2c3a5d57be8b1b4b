"""Reading the text files users hand to compact-bert (tables, sentence lists, STS pairs): one place that decides the
encoding and names the line of a byte that is not UTF-8."""

from __future__ import annotations

import gzip
from pathlib import Path

from .run_errors import RunSettingsError

__all__ = ["read_utf8_text"]


def read_utf8_text(path: Path) -> str:
    """The file's text: UTF-8, a leading byte-order mark dropped (spreadsheet exports write one), and a byte that is
    not UTF-8 named with its line."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise RunSettingsError(
            f"{path}:{line}: byte {raw[error.start : error.start + 1]!r} is not UTF-8 ({error.reason}); "
            "save the file as UTF-8."
        ) from None
