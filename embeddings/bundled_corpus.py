"""The sentences bundled for embedding distillation (``embeddings/corpus/``), and how to regenerate them.

``stsb_train_sentences.txt.gz`` holds the distinct sentences (one per line, in order of first appearance) of the
first ``STSB_TRAIN_PAIRS`` pairs of the STS Benchmark *train* split, without their scores: embedding distillation
needs sentences, not labels. The slice keeps the package's bundled data under 2 MB. It is a function of the STS-B
file alone, rebuilt byte for byte from the shared copy (``../shared/data/stsb``)::

    python -m compact_bert.embeddings.bundled_corpus ../shared/data/stsb

The STS-B dev split is never part of it: it is the evaluation set (``evaluation/stsb/``). See
``corpus/ATTRIBUTION.md``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
from importlib import resources
from pathlib import Path

__all__ = ["STSB_TRAIN_PAIRS", "bundled_stsb_sentences", "stsb_sentence_slice", "write_sentence_slice"]

STSB_TRAIN_PAIRS = 4500
SLICE_FILE = "stsb_train_sentences.txt.gz"


def bundled_stsb_sentences() -> Path:
    """The STS-B train sentence slice: with the bundled SST-2 training sentences, the default corpus of ``distill
    embeddings`` (``jobs/distill_embeddings.default_sentence_files``)."""
    return Path(str(resources.files(__package__).joinpath("corpus", SLICE_FILE)))


def stsb_sentence_slice(train_file: str | Path, pairs: int = STSB_TRAIN_PAIRS) -> bytes:
    """The gzip bytes of the slice built from STS-B ``train.tsv`` (fixed gzip header: no time stamp, no name)."""
    with open(train_file, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if rows[0][:2] != ["sentence1", "sentence2"]:
        raise ValueError(f"{train_file}: expected the header sentence1<TAB>sentence2<TAB>score, got {rows[0]}.")
    sentences = dict.fromkeys(text.strip() for row in rows[1 : pairs + 1] for text in row[:2] if text.strip())
    return gzip.compress(("\n".join(sentences) + "\n").encode("utf-8"), compresslevel=9, mtime=0)


def write_sentence_slice(source_dir: str | Path, output_dir: str | Path | None = None) -> Path:
    output = Path(output_dir) if output_dir else Path(str(resources.files(__package__).joinpath("corpus")))
    path = output / SLICE_FILE
    path.write_bytes(stsb_sentence_slice(Path(source_dir) / "train.tsv"))
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source_dir", help="Folder with STS-B train.tsv (e.g. ../shared/data/stsb).")
    print(write_sentence_slice(parser.parse_args().source_dir))
