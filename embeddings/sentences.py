"""The unlabelled sentences embedding distillation learns from: text files, the sentences of pair data sets, or the
sentences bundled with the package.

A ``.txt`` file holds one sentence per line; a ``.tsv`` / ``.tsv.gz`` file with a header contributes every
non-empty field of its text columns (``sentence``, ``sentence1``, ``sentence2``, ``question1``, ``question2``,
``text``), read with quoting off as GLUE and STS files need. Sentences are de-duplicated in order of first
appearance: the teacher's embedding of a sentence is the same wherever it occurs.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..training.run_errors import RunSettingsError
from ..training.text_files import read_utf8_text

__all__ = ["TEXT_COLUMNS", "read_sentences"]

TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "question1", "question2", "text")


def _refuse_a_table_named_as_text(path: Path, lines: list[str]) -> None:
    """A file read as one sentence per line whose content is a tab-separated table (an STS or GLUE file under a .txt
    name) would train on its header and its tab-joined rows: the format found and the one expected are named."""
    header = lines[0].split("\t") if lines else []
    tabbed = sum("\t" in line for line in lines)
    if (len(header) > 1 and any(name in TEXT_COLUMNS for name in header)) or (lines and tabbed > len(lines) / 2):
        raise RunSettingsError(
            f"--sentences: {path} is read as one sentence per line (its suffix), but its content is a tab-separated "
            f"table (first line {lines[0][:80]!r}; {tabbed} of {len(lines)} lines hold tabs). Name it .tsv to "
            f"read the text columns of its header ({', '.join(TEXT_COLUMNS)}), or give one sentence per line."
        )


def _file_sentences(path: Path) -> list[str]:
    text = read_utf8_text(path)
    stem_suffixes = path.name.split(".")[1:]
    if "tsv" not in stem_suffixes:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        _refuse_a_table_named_as_text(path, lines)
        return lines
    rows = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(rows, [])
    columns = [index for index, name in enumerate(header) if name in TEXT_COLUMNS]
    if not columns:
        raise RunSettingsError(
            f"{path}: no text column in its header {header}; valid names: {', '.join(TEXT_COLUMNS)}."
        )
    sentences = []
    for line, row in enumerate(rows, start=2):
        if row and len(row) != len(header):
            raise RunSettingsError(
                f"{path}, line {line}: {len(row)} tab-separated fields, the header has {len(header)}."
            )
        sentences.extend(row[index].strip() for index in columns if row and row[index].strip())
    return sentences


def read_sentences(sources: list[str | Path], minimum: int = 1) -> list[str]:
    """Distinct sentences of ``sources`` in order; fewer than ``minimum`` (one batch) is an error naming them."""
    sentences: dict[str, None] = {}
    for source in sources:
        path = Path(source)
        if not path.is_file():
            raise RunSettingsError(
                f"--sentences: {path} is not a file (give .txt files, one sentence per line, or "
                ".tsv files with a header naming their text columns)."
            )
        sentences.update(dict.fromkeys(_file_sentences(path)))
    if len(sentences) < minimum:
        raise RunSettingsError(
            f"--sentences: {', '.join(map(str, sources))} hold {len(sentences)} distinct sentence(s), fewer than one "
            f"batch ({minimum}); give more text or a smaller --per_device_train_batch_size."
        )
    return list(sentences)
