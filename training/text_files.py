"""Reading the text files users hand to compact-bert (tables, sentence lists, STS pairs, a folder's JSON files): one
place that decides the encoding and names the line of a byte that is not UTF-8 or of JSON that does not parse."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from .run_errors import RunSettingsError

__all__ = ["parse_json_object", "read_json_object", "read_utf8_text"]


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


def read_json_object(path: Path, what: str) -> dict:
    """The JSON object in ``path`` (``what`` says which file it should be, e.g. "a run summary"); an empty, truncated
    or non-object file is a ``RunSettingsError`` naming the file, the line and column, and what was expected."""
    text = read_utf8_text(Path(path))
    if not text.strip():
        raise RunSettingsError(f"{path} is empty: expected {what} (a JSON object); remove it or write it again.")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise RunSettingsError(
            f"{path}:{error.lineno}:{error.colno}: not valid JSON ({error.msg}); expected {what} (a JSON object). "
            "A file cut short by an interrupted write or a full disk looks like this: write it again."
        ) from None
    if not isinstance(data, dict):
        raise RunSettingsError(f"{path} holds a JSON {type(data).__name__}, not an object: expected {what}.")
    return data


def parse_json_object(text: str, field: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise RunSettingsError(
            f"--{field} must be a JSON object, e.g. '{{\"num_hidden_layers\": 4}}': {error}"
        ) from None
    if not isinstance(value, dict):
        raise RunSettingsError(f"--{field} must be a JSON object, got {text!r}.")
    return value
