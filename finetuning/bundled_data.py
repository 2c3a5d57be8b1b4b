"""The SST-2 slice bundled with the package (``finetuning/sst2_slice/``), and how to regenerate it.

The main job (``compact-bert distill minimoe``) fine-tunes its student on this slice so that it reports a
downstream accuracy with nothing downloaded. The slice is a function of the GLUE files and a seed:
``write_sst2_slice`` rebuilds it byte for byte from the shared copy of GLUE SST-2 (``../shared/data/sst2``)::

    python -m compact_bert.finetuning.bundled_data ../shared/data/sst2

``train.tsv`` is a uniform random sample (without replacement, kept in the original order) of the GLUE train
split — GLUE's train split is mostly short phrases of the treebank, and a uniform sample keeps that mix;
``validation.tsv`` is the whole GLUE dev set (872 sentences), unchanged: it is the evaluation set, never
trained or tuned on. See ``sst2_slice/ATTRIBUTION.md``.
"""

from __future__ import annotations

import argparse
import random
from importlib import resources
from pathlib import Path

__all__ = [
    "SST2_SLICE_SEED",
    "SST2_SLICE_TRAIN_ROWS",
    "bundled_sst2_files",
    "sst2_slice_texts",
    "write_sst2_slice",
]

SST2_SLICE_SEED = 2013  # the year of the Stanford Sentiment Treebank; any fixed seed would do
SST2_SLICE_TRAIN_ROWS = 3000
SLICE_FOLDER = "sst2_slice"


def bundled_sst2_files() -> dict[str, Path]:
    """Paths of the bundled ``train`` and ``validation`` files (header ``sentence<TAB>label``) and of the
    ``unlabeled`` sentences (header ``sentence``, gzip-compressed): 6,000 GLUE SST-2 train sentences outside the slice
    and the recipe studies' selection set, the transfer set of the tiny students' recipe (``--unlabeled_file``;
    written by ``examples/task_recipes.write_sst2_unlabeled``, and checked against it by a test)."""
    folder = resources.files(__package__).joinpath(SLICE_FOLDER)
    names = {"train": "train.tsv", "validation": "validation.tsv", "unlabeled": "unlabeled.tsv.gz"}
    # resolved: an editable install reaches the files through links, whose paths would be printed and recorded
    return {split: Path(str(folder.joinpath(name))).resolve() for split, name in names.items()}


def _read_lines(path: Path) -> tuple[str, list[str]]:
    text = path.read_bytes().decode("utf-8")  # bytes as they are: no newline translation
    if not text.endswith("\n"):
        text += "\n"
    header, *rows = [line + "\n" for line in text[:-1].split("\n")]  # only "\n" ends a row, as in GLUE's files
    if header.rstrip("\n") != "sentence\tlabel":
        raise ValueError(f"{path}: expected the GLUE SST-2 header 'sentence<TAB>label', got {header.rstrip()!r}.")
    return header, rows


def sst2_slice_texts(
    source_dir: str | Path, train_rows: int = SST2_SLICE_TRAIN_ROWS, seed: int = SST2_SLICE_SEED
) -> dict[str, str]:
    """The contents of the slice's ``train.tsv`` and ``validation.tsv`` built from GLUE SST-2 in ``source_dir``."""
    source_dir = Path(source_dir)
    header, rows = _read_lines(source_dir / "train.tsv")
    if not 0 < train_rows <= len(rows):
        raise ValueError(
            f"train_rows must be in 1..{len(rows)} (the rows of {source_dir / 'train.tsv'}), got {train_rows}."
        )
    chosen = sorted(random.Random(seed).sample(range(len(rows)), train_rows))
    _read_lines(source_dir / "validation.tsv")  # header check only: the dev set is copied unchanged
    return {
        "train": header + "".join(rows[index] for index in chosen),
        "validation": (source_dir / "validation.tsv").read_bytes().decode("utf-8"),
    }


def write_sst2_slice(source_dir: str | Path, target_dir: str | Path | None = None) -> dict[str, Path]:
    """Write the slice (default: over the bundled files) and return the paths written."""
    targets = (
        {split: path for split, path in bundled_sst2_files().items() if split in ("train", "validation")}
        if target_dir is None
        else {split: Path(target_dir) / f"{split}.tsv" for split in ("train", "validation")}
    )
    for split, text in sst2_slice_texts(source_dir).items():
        targets[split].parent.mkdir(parents=True, exist_ok=True)
        targets[split].write_bytes(text.encode("utf-8"))
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the bundled SST-2 slice from the GLUE SST-2 files.")
    parser.add_argument(
        "source_dir", help="Folder with GLUE SST-2 train.tsv and validation.tsv, e.g. ../shared/data/sst2"
    )
    parser.add_argument("--target_dir", default=None, help="Where to write (default: the package's sst2_slice/).")
    arguments = parser.parse_args(argv)
    for path in write_sst2_slice(arguments.source_dir, arguments.target_dir).values():
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
