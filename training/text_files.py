"""Reading the text files users hand to compact-bert (tables, sentence lists, STS pairs, a folder's JSON files): one
place that decides the encoding and names the line of a byte that is not UTF-8 or of JSON that does not parse."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from .run_errors import RunSettingsError

__all__ = ["parse_json_object", "read_json_object", "read_utf8_text"]


# The first bytes of binary formats users hand over instead of text, and what to do instead.
_BINARY_FORMATS = (
    (b"PAR1", "a Parquet file", "load it with `datasets` and pass the saved folder as --dataset_name"),
    (b"PK\x03\x04", "a ZIP archive (or an .xlsx / .docx file)", "export the sheet as .tsv or .csv (UTF-8)"),
    (b"BZh", "a bzip2-compressed file", "decompress it (bunzip2), or compress it with gzip (.gz)"),
    (b"\xfd7zXZ\x00", "an xz-compressed file", "decompress it (unxz), or compress it with gzip (.gz)"),
    (b"\x28\xb5\x2f\xfd", "a Zstandard-compressed file", "decompress it (unzstd), or compress it with gzip (.gz)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "extract it"),
    (b"%PDF", "a PDF document", "export its text as UTF-8"),
    (b"ARROW1", "an Arrow file", "load it with `datasets` and pass the saved folder as --dataset_name"),
    (b"\xd0\xcf\x11\xe0", "an old Office document (.xls / .doc)", "export the sheet as .tsv or .csv (UTF-8)"),
)
_GZIP_MAGIC = b"\x1f\x8b"


def read_utf8_text(path: Path) -> str:
    """The file's text: UTF-8, a leading byte-order mark dropped (spreadsheet exports write one), and a byte that is
    not UTF-8 named with its line. A gzip-compressed file is decompressed whatever its name (``train.tsv`` that is
    really ``train.tsv.gz`` reads as the table it holds); another binary format is named by its first bytes, with
    what to do instead, rather than answered with advice about the encoding."""
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise RunSettingsError(
                f"{path} is gzip-compressed but cannot be decompressed ({error}): cut short by an interrupted copy or "
                "download? Copy it again."
            ) from None
    for magic, kind, instead in _BINARY_FORMATS:
        if raw.startswith(magic):
            raise RunSettingsError(
                f"{path} is {kind}, not text: compact-bert reads UTF-8 text files (tables as .tsv / .csv / .json / "
                f".jsonl, sentence lists as .txt, CoNLL as .txt; each may be gzip-compressed); {instead}."
            )
    if b"\x00" in raw[:8192] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise RunSettingsError(
            f"{path} holds NUL bytes: a binary file, not UTF-8 text (UTF-16 files start with their byte-order mark); "
            "give the data as a UTF-8 text file."
        )
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise RunSettingsError(f"{path} is UTF-16 text (its byte-order mark says so): save it as UTF-8.")
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
