"""Fine-tuning data: GLUE-style sentence (pair) tasks and CoNLL-style NER, read from files or ``datasets``.

Everything here is a small function of its inputs so that it can be tested without a model. Labels are read
from the training data (never assumed), and everything that can be wrong with the input — a missing column, a
regression label that is not a number, a CoNLL line without a tag, an evaluation tag that training never
shows — fails before any model is built, with the file, line or column at fault.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from ..training.text_files import read_utf8_text

__all__ = [
    "GLUE_TASKS",
    "NER_METRIC",
    "TAG_PREFIXES",
    "FinetuneDataArguments",
    "LabeledSplits",
    "align_labels_with_words",
    "build_label_maps",
    "check_tag_scheme",
    "conventional_names",
    "load_finetuning_data",
    "load_unlabeled_examples",
    "read_conll",
    "read_table",
    "sort_tags",
    "tokenize_sequence_dataset",
    "tokenize_token_dataset",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GlueTask:
    text_columns: tuple[str, ...]
    dev_metric: str  # the `glue` metric's result key reported by paper 002 (Table 7)
    max_seq_length: int = 128  # paper 002, Table 7
    regression: bool = False
    validation_split: str = "validation"
    # The names of the label ids 0, 1, ... (the `glue` dataset's ClassLabel names), for files whose labels are ids.
    label_names: tuple[str, ...] = ()
    # GLUE's original files (the gluebenchmark.com downloads): their column names -> the names above ...
    original_columns: tuple[tuple[str, str], ...] = ()
    # ... or, for a file without a header line (CoLA's train.tsv / dev.tsv), the names of its columns.
    headerless_columns: tuple[str, ...] = ()


# GLUE's column names (as in the `glue` dataset on the Hub and transformers' run_glue.py).
GLUE_TASKS: dict[str, GlueTask] = {
    # not in paper 002's tables: GLUE's own metric
    "cola": GlueTask(
        ("sentence",),
        "matthews_correlation",
        label_names=("unacceptable", "acceptable"),
        headerless_columns=("source", "label", "original_label", "sentence"),
    ),
    "sst2": GlueTask(("sentence",), "accuracy", max_seq_length=64, label_names=("negative", "positive")),
    "mrpc": GlueTask(
        ("sentence1", "sentence2"),
        "f1",
        label_names=("not_equivalent", "equivalent"),
        original_columns=(("#1 String", "sentence1"), ("#2 String", "sentence2"), ("Quality", "label")),
    ),
    "qqp": GlueTask(
        ("question1", "question2"),
        "f1",
        label_names=("not_duplicate", "duplicate"),
        original_columns=(("is_duplicate", "label"),),
    ),
    "stsb": GlueTask(("sentence1", "sentence2"), "spearmanr", regression=True, original_columns=(("score", "label"),)),
    "mnli": GlueTask(
        ("premise", "hypothesis"),
        "accuracy",
        validation_split="validation_matched",
        label_names=("entailment", "neutral", "contradiction"),
        original_columns=(("sentence1", "premise"), ("sentence2", "hypothesis"), ("gold_label", "label")),
    ),
    "qnli": GlueTask(("question", "sentence"), "accuracy", label_names=("entailment", "not_entailment")),
    "rte": GlueTask(("sentence1", "sentence2"), "accuracy", label_names=("entailment", "not_entailment")),
    "wnli": GlueTask(("sentence1", "sentence2"), "accuracy", label_names=("not_entailment", "entailment")),
}
TASK_TYPES = ("classification", "regression", "ner")
NER_METRIC = "overall_f1"  # entity-level F1 of the `conll_ner` metric (paper 002, Table 7: CoNLL F1)
# Scheme letters of BIO / IOB2 and IOBES tags; the metric decides how inconsistent sequences (I-X after O) chunk.
TAG_PREFIXES = ("B", "I", "E", "S")
TABLE_SUFFIXES = (".tsv", ".csv", ".json", ".jsonl")


def table_suffix(path: str | Path) -> str:
    """A table file's format suffix, ``.gz`` looked through (``train.tsv.gz`` is a ``.tsv``)."""
    suffixes = [suffix.lower() for suffix in Path(path).suffixes]
    if suffixes[-1:] == [".gz"]:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


@dataclass
class FinetuneDataArguments:
    """Which task and data (parsed by ``HfArgumentParser``)."""

    task_name: str | None = field(
        default=None,
        metadata={
            "help": f"A GLUE task ({', '.join(GLUE_TASKS)}) for its column conventions and dev metric, or "
            "'ner'. Without it, --task_type and the column flags describe the data."
        },
    )
    task_type: str | None = field(
        default=None,
        metadata={
            "help": f"One of {', '.join(TASK_TYPES)}; default: from --task_name, else 'ner' for CoNLL "
            ".txt/.conll files and 'classification' otherwise."
        },
    )
    train_file: str | None = field(
        default=None,
        metadata={"help": "Training data: .tsv, .csv, .json, .jsonl (tables) or .txt/.conll (CoNLL NER)."},
    )
    validation_file: str | None = field(default=None, metadata={"help": "Dev data, same formats as --train_file."})
    dataset_name: str | None = field(
        default=None,
        metadata={"help": "A `datasets` dataset: a folder written by save_to_disk, or a Hub name (online only)."},
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Configuration of --dataset_name."})
    validation_split: str | None = field(
        default=None, metadata={"help": "Split of --dataset_name used for evaluation (default: validation)."}
    )
    text_columns: str | None = field(
        default=None, metadata={"help": "Comma-separated text column(s), one or two (default: the GLUE task's)."}
    )
    label_column: str = field(default="label", metadata={"help": "Column holding the label."})
    token_column: str = field(default="tokens", metadata={"help": "NER: column of a dataset holding the words."})
    tag_column: str = field(default="ner_tags", metadata={"help": "NER: column of a dataset holding the tags."})
    label_list: str | None = field(
        default=None,
        metadata={
            "help": "Comma-separated label names in id order; default: read from the training data. Needed "
            "when the dev data has labels that training never shows."
        },
    )
    max_seq_length: int | None = field(
        default=None,
        metadata={"help": "Tokens per example after truncation (default: 64 for SST-2, else 128; paper 002 Table 7)."},
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Use the first N training examples (quick runs)."}
    )
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use the first N dev examples (quick runs)."})

    def __post_init__(self):
        if self.task_name is not None:
            self.task_name = self.task_name.lower().replace("-", "")
            if self.task_name not in (*GLUE_TASKS, "ner", "conll2003"):
                raise ValueError(
                    f"--task_name {self.task_name!r} is unknown; valid: {', '.join(GLUE_TASKS)}, ner (or leave it "
                    "out and describe the data with --task_type / --text_columns / --label_column)."
                )
        if self.task_type is not None and self.task_type not in TASK_TYPES:
            raise ValueError(f"--task_type {self.task_type!r} is unknown; valid: {', '.join(TASK_TYPES)}.")
        if self.train_file is None and self.dataset_name is None:
            raise ValueError("Give the training data: --train_file (and --validation_file) or --dataset_name.")
        if self.train_file is not None and self.dataset_name is not None:
            raise ValueError("Give either --train_file or --dataset_name, not both.")
        if self.label_list is not None:
            names = [name.strip() for name in self.label_list.split(",")]
            duplicates = sorted({name for name in names if names.count(name) > 1})
            if "" in names or duplicates:
                raise ValueError(
                    f"--label_list {self.label_list!r} has "
                    + (f"duplicate label(s) {duplicates}" if duplicates else "an empty label")
                    + "; give each label once, in id order."
                )
        for name in ("max_seq_length", "max_train_samples", "max_eval_samples"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"--{name} must be >= 1, got {getattr(self, name)}.")

    @property
    def glue_task(self) -> GlueTask | None:
        return GLUE_TASKS.get(self.task_name)

    def resolved_task_type(self) -> str:
        if self.task_type is not None:
            return self.task_type
        if self.task_name in ("ner", "conll2003"):
            return "ner"
        if self.glue_task is not None:
            return "regression" if self.glue_task.regression else "classification"
        if self.train_file is not None and table_suffix(self.train_file) not in TABLE_SUFFIXES:
            return "ner"
        return "classification"

    def resolved_text_columns(self) -> tuple[str, ...]:
        if self.text_columns:
            columns = tuple(column.strip() for column in self.text_columns.split(",") if column.strip())
            if not 1 <= len(columns) <= 2:
                raise ValueError(f"--text_columns takes one or two columns, got {self.text_columns!r}.")
            return columns
        if self.glue_task is not None:
            return self.glue_task.text_columns
        return ("sentence",)

    def resolved_max_seq_length(self) -> int:
        if self.max_seq_length is not None:
            return self.max_seq_length
        return self.glue_task.max_seq_length if self.glue_task is not None else 128

    def dev_metric(self) -> str:
        """The result key used to pick the best checkpoint (paper 002, Table 7)."""
        task_type = self.resolved_task_type()
        if task_type == "ner":
            return NER_METRIC
        if self.glue_task is not None:
            return self.glue_task.dev_metric
        return "spearmanr" if task_type == "regression" else "accuracy"


@dataclass
class LabeledSplits:
    """Train and dev datasets (raw text columns and a ``label`` column of ids or floats) and the label names."""

    train: datasets.Dataset
    validation: datasets.Dataset | None
    task_type: str
    label_names: list[str] | None  # None for regression
    text_columns: tuple[str, ...] = ()


# ----------------------------------------------------------------------------------------------- reading files
def _check_file(path: str | Path, role: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{role}: {path} does not exist or is not a file.")
    if path.stat().st_size == 0:
        raise ValueError(f"{role}: {path} is empty.")
    return path


def read_table(
    path: str | Path, role: str = "--train_file", fieldnames: tuple[str, ...] | None = None
) -> tuple[list[dict], list[int]]:
    """Rows of a .tsv / .csv (header line first, unless ``fieldnames`` names the columns of a file without one) or
    .json (a list of objects) / .jsonl file, and each row's line number (for errors). TSV files are read without
    quote handling, as GLUE's files are written."""
    path = _check_file(path, role)
    suffix = table_suffix(path)
    rows: list[dict] = []
    lines: list[int] = []
    if suffix == ".tsv":
        rows, lines = _tsv_rows(path, read_utf8_text(path), fieldnames)
    elif suffix == ".csv":
        csv.field_size_limit(2**31 - 1)  # a long review is a long field, not an error (the default stops at 128 KB)
        reader = csv.DictReader(_lines(read_utf8_text(path)), fieldnames=fieldnames)
        for row in reader:
            if None in row:
                raise ValueError(f"{path}:{reader.line_num}: more fields than the header's {reader.fieldnames}.")
            rows.append(row)
            lines.append(reader.line_num)
    elif suffix == ".jsonl":
        for number, line in enumerate(read_utf8_text(path).split("\n"), start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not a JSON object: {error}") from None
                if not isinstance(row, dict):
                    raise ValueError(f"{path}:{number}: a JSON {type(row).__name__}, not an object of named fields.")
                rows.append(row)
                lines.append(number)
    elif suffix == ".json":
        try:
            loaded = json.loads(read_utf8_text(path))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}") from None
        if isinstance(loaded, dict) and isinstance(loaded.get("data"), list):
            loaded = loaded["data"]
        if not isinstance(loaded, list):
            raise ValueError(f"{path}: expected a list of objects (or JSON lines in a .jsonl file).")
        rows, lines = loaded, [index + 1 for index in range(len(loaded))]  # JSON: the record number
        wrong = next((index for index, row in enumerate(rows) if not isinstance(row, dict)), None)
        if wrong is not None:
            raise ValueError(f"{path}: record {wrong + 1} is a JSON {type(rows[wrong]).__name__}, not an object.")
    else:
        raise ValueError(
            f"{role}: {path} has suffix {suffix!r}; tables must be one of {', '.join(TABLE_SUFFIXES)} (each may be "
            "gzip-compressed, e.g. train.tsv.gz)."
        )
    if not rows:
        raise ValueError(f"{role}: {path} has no data rows.")
    return rows, lines


def _tsv_rows(path: Path, text: str, fieldnames: tuple[str, ...] | None) -> tuple[list[dict], list[int]]:
    """A TSV file's rows as ``csv.DictReader`` reads them without quote handling (as GLUE's files are written: fields
    split at tabs, a row's end at ``\\n`` or ``\\r\\n``, blank lines skipped, missing trailing fields ``None``) — split
    here rather than by ``csv``, which holds a field at four bytes a character while it reads it (a 50 MB review
    took 450 MB)."""
    rows, lines = [], []
    header = list(fieldnames) if fieldnames is not None else None
    for number, line in enumerate(_lines(text), start=1):
        fields = line.rstrip("\n").rstrip("\r").split("\t")
        if fields == [""]:
            continue
        if header is None:
            header = fields
            continue
        if len(fields) > len(header):
            raise ValueError(f"{path}:{number}: more fields than the header's {header}.")
        rows.append(dict(zip(header, fields + [None] * (len(header) - len(fields)))))
        lines.append(number)
    return rows, lines


def _lines(text: str):
    """``text``'s lines with their ``\\n``, one at a time: what ``csv`` reads from a file opened with ``newline=""``,
    without the four bytes a character that ``io.StringIO`` would hold the whole text in (a 50 MB field made 200 MB)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


_TAG = re.compile(r"^(O|[BIESLU]-\S+)$")


def _not_conll(path: Path, text: str) -> str | None:
    """What ``path`` looks like when its suffix or content is not CoNLL's (``None`` when it may be): NER files were
    read as CoNLL whatever they held, and a table failed later on its header's "tags"."""
    suffixes = "".join(path.suffixes[-2:]).lower()
    first = next((line.strip() for line in text.split("\n") if line.strip()), "")
    if first.startswith(("{", "[")) or suffixes.endswith((".json", ".jsonl")):
        return "looks like JSON (its suffix or its first line), not CoNLL text"
    fields = first.split()
    separated = "\t" in first or "," in first
    if len(fields) >= 2 and fields[0] != "-DOCSTART-" and separated and not _TAG.match(fields[-1]):
        kind = "CSV" if "," in first and "\t" not in first else "TSV"
        return f"looks like a {kind} table (first line {first[:80]!r}, whose last field is not a tag), not CoNLL"
    return None


def read_conll(
    path: str | Path, role: str = "--train_file", tagged: bool = True
) -> tuple[list[list[str]], list[list[str]]]:
    """Sentences of a CoNLL file: one ``token ... TAG`` per line (first column = token, last = tag), a blank line
    between sentences, ``-DOCSTART-`` lines skipped. ``tagged=False`` (unlabeled sentences): one word per line, a
    tag after it allowed and ignored (a line of several words ending in no tag is refused: a sentence a line would
    otherwise keep only its first word); each sentence's tags are then ``"O"``, placeholders."""
    path = _check_file(path, role)
    text = read_utf8_text(path)
    problem = _not_conll(path, text)
    if problem:
        raise ValueError(
            f"{role}: {path} {problem}; NER reads CoNLL text: one 'token TAG' per line (whitespace-separated, the "
            "tag last), a blank line between sentences. A table of words and tags goes in as a `datasets` "
            "dataset (--dataset_name, --token_column, --tag_column)."
        )
    sentences: list[list[str]] = []
    tags: list[list[str]] = []
    words: list[str] = []
    word_tags: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if words:
                sentences.append(words)
                tags.append(word_tags)
            words, word_tags = [], []
            continue
        if len(fields) < 2 and tagged:
            raise ValueError(f"{path}:{number}: expected 'token TAG' (whitespace-separated), got {line.rstrip()!r}.")
        if not tagged and len(fields) >= 2 and not _TAG.match(fields[-1]):  # a sentence a line would lose its words
            raise ValueError(
                f"{path}:{number}: expected one word per line (a tag after it allowed), got {line.rstrip()[:80]!r}; "
                "write one word per line and a blank line between sentences (CoNLL text)."
            )
        words.append(fields[0])
        word_tags.append(fields[-1] if tagged else "O")
    if words:
        sentences.append(words)
        tags.append(word_tags)
    if not sentences:
        raise ValueError(f"{role}: {path} holds no sentence.")
    return sentences, tags


# ------------------------------------------------------------------------------------------------------ labels
def check_tag_scheme(tags, source: str) -> None:
    """Every tag is ``O`` or ``<B|I|E|S>-<TYPE>``; anything else is an error naming the source."""
    bad = sorted({tag for tag in tags if tag != "O" and (len(tag) < 3 or tag[1] != "-" or tag[0] not in TAG_PREFIXES)})
    if bad:
        raise ValueError(
            f"{source}: tags {', '.join(bad)} are not 'O' or '<{'|'.join(TAG_PREFIXES)}>-TYPE' (BIO / IOBES)."
        )


def sort_tags(tags) -> list[str]:
    """``O`` first, then by entity type, ``B`` before ``I`` (a stable, readable id order)."""
    return sorted(set(tags), key=lambda tag: (tag != "O", tag[2:], "BIES".find(tag[:1]), tag))


def build_label_maps(
    train_labels, eval_labels, given_names: list[str] | None, sources: tuple[str, str], is_tags: bool
) -> list[str]:
    """The label names in id order: ``given_names`` if any, else the sorted training labels. Labels of either
    split outside that list are an error naming the split's source."""
    names = (
        list(given_names) if given_names else (sort_tags(train_labels) if is_tags else _sorted_labels(train_labels))
    )
    known = set(names)
    for labels, source in ((train_labels, sources[0]), (eval_labels, sources[1])):
        unknown = sorted({str(label) for label in labels} - known)
        if unknown:
            hint = "" if given_names else " (training never shows them); pass every label with --label_list"
            raise ValueError(f"{source}: labels {', '.join(unknown)} are not in the label set {names}{hint}.")
    return names


def _sorted_labels(labels) -> list[str]:
    values = set(labels)
    try:
        return [str(value) for value in sorted(values, key=float)]  # 0, 1, 2, ... numerically, not as text
    except (TypeError, ValueError):
        return sorted(str(value) for value in values)


def _task_label_order(train_labels, task: GlueTask | None) -> list[str] | None:
    """The task's label names in the `glue` dataset's id order when the file gives its labels as those names
    (MNLI's ``gold_label``: entailment, neutral, contradiction, not sorted alphabetically), else ``None``."""
    if task is None or not task.label_names:
        return None
    return list(task.label_names) if {str(label) for label in train_labels} <= set(task.label_names) else None


def conventional_names(names: list[str], task: GlueTask | None) -> list[str]:
    """GLUE files give most labels as ids (``0`` / ``1``); the model's ``id2label`` gets the task's names for them
    (``negative`` / ``positive``), so that a pipeline answers in words. Other labels are kept as they are."""
    if task is None or not task.label_names:
        return names
    if not all(name.isdigit() and int(name) < len(task.label_names) for name in names):
        return names
    return [task.label_names[int(name)] for name in names]


def _regression_values(values, lines, source: str, column: str) -> list[float]:
    result = []
    for value, line in zip(values, lines):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
        if number is None or not math.isfinite(number):  # float('nan') parses: a NaN target makes every loss NaN
            raise ValueError(
                f"{source}:{line}: column {column!r} holds {value!r}, not a finite number (regression labels must be "
                "numeric)."
            ) from None
        result.append(number)
    return result


# ------------------------------------------------------------------------------------------------ the two kinds
def _glue_original_rows(path, role, task: GlueTask | None, rows: list[dict], lines: list[int], needed):
    """``rows`` of one of GLUE's original files under the task's column names: a headerless file re-read with its
    columns named, an original header renamed. Other files are returned as read."""
    if task is None or all(column in rows[0] for column in needed):
        return rows, lines
    if task.headerless_columns and len(rows[0]) == len(task.headerless_columns):
        header = list(rows[0])
        if header[1] in ("0", "1") and header[2] in ("", "*"):  # CoLA's first data line: source, label, mark, text
            return read_table(path, role, fieldnames=task.headerless_columns)
    renames = dict(task.original_columns)
    if renames and all(original in rows[0] for original in renames):
        return [{renames.get(column, column): value for column, value in row.items()} for row in rows], lines
    return rows, lines


def _table_split(path, role, arguments) -> tuple[dict, list[int], str]:
    rows, lines = read_table(path, role)
    needed = (*arguments.resolved_text_columns(), arguments.label_column)
    if arguments.text_columns is None and arguments.label_column == "label":  # the task's own columns
        rows, lines = _glue_original_rows(path, role, arguments.glue_task, rows, lines, needed)
    columns = list(rows[0])
    missing = [column for column in needed if column not in columns]
    if missing:
        raise ValueError(f"{role}: {path} has no column {', '.join(map(repr, missing))}; its columns: {columns}.")
    data = {column: [row.get(column) for row in rows] for column in needed}
    check_rows(
        data,
        lines,
        str(path),
        arguments.resolved_text_columns(),
        arguments.label_column,
        regression=arguments.resolved_task_type() == "regression",
    )
    return data, lines, str(path)


def _kind(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "decimal" if isinstance(value, float) else "string"


def check_rows(
    data: dict, lines: list[int], source: str, text_columns, label_column: str | None, regression: bool = False
) -> None:
    """Rows are data, not accidents: no missing (null) text or label, no empty text, and labels of one kind per
    file (``1`` and ``1.0`` in one JSON file would otherwise be two classes, ``true`` and ``"1"`` three).
    ``label_column`` ``None``: unlabeled rows, the text columns checked alone."""
    for column in (*text_columns, *([label_column] if label_column is not None else [])):
        for value, line in zip(data[column], lines):
            if value is None:
                raise ValueError(
                    f"{source}:{line}: column {column!r} is missing or null; every row needs a value "
                    "(drop or fill the row)."
                )
            if column != label_column and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{source}:{line}: column {column!r} holds {value!r}, not a non-empty text.")
    if label_column is None:
        return
    first_of_kind: dict[str, tuple[int, object]] = {}
    for value, line in zip(data[label_column], lines):
        kind = _kind(value)
        first_of_kind.setdefault("number" if regression and kind in ("integer", "decimal") else kind, (line, value))
    if len(first_of_kind) > 1:
        examples = ", ".join(f"{kind} {value!r} (line {line})" for kind, (line, value) in first_of_kind.items())
        raise ValueError(
            f"{source}: column {label_column!r} mixes label kinds: {examples}; write every label the same way."
        )


def _dataset_split(dataset_dict, split: str, arguments, columns) -> tuple[dict, list[int], str]:
    source = f"--dataset_name {arguments.dataset_name} [{split}]"
    if split not in dataset_dict:
        raise ValueError(f"{source}: no split {split!r}; splits: {list(dataset_dict)}.")
    dataset = dataset_dict[split]
    missing = [column for column in columns if column not in dataset.column_names]
    if missing:
        raise ValueError(f"{source}: no column {', '.join(map(repr, missing))}; its columns: {dataset.column_names}.")
    data = {column: dataset[column] for column in columns}
    return data, [index for index in range(len(dataset))], f"{source} row"


def _class_label_names(dataset_dict, column: str) -> list[str] | None:
    feature = next(iter(dataset_dict.values())).features.get(column)
    inner = getattr(feature, "feature", feature)  # Sequence(ClassLabel) for NER tags
    return list(inner.names) if isinstance(inner, datasets.ClassLabel) else None


def _load_dataset_dict(arguments) -> datasets.DatasetDict:
    local = Path(arguments.dataset_name)
    if local.is_dir():
        loaded = datasets.load_from_disk(str(local))
    else:
        try:
            loaded = datasets.load_dataset(arguments.dataset_name, arguments.dataset_config_name)
        except (OSError, ValueError, ConnectionError) as error:  # unknown name, offline, no such config
            first_line = str(error).splitlines()[0] if str(error) else ""
            raise ValueError(
                f"--dataset_name {arguments.dataset_name}: `datasets` cannot load it ({type(error).__name__}: "
                f"{first_line}). Offline (HF_HUB_OFFLINE=1) only datasets already in the cache or saved with "
                "save_to_disk load; or give --train_file / --validation_file."
            ) from None
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    return loaded


def _truncate(data: dict, lines: list[int], limit: int | None) -> tuple[dict, list[int]]:
    if limit is None:
        return data, lines
    return {column: values[:limit] for column, values in data.items()}, lines[:limit]


def load_finetuning_data(arguments: FinetuneDataArguments) -> LabeledSplits:
    """Read, check and label both splits; the returned datasets hold text/words and a ``label`` column."""
    task_type = arguments.resolved_task_type()
    given = [name.strip() for name in arguments.label_list.split(",")] if arguments.label_list else None
    dataset_dict = _load_dataset_dict(arguments) if arguments.dataset_name else None
    eval_split = arguments.validation_split or (
        arguments.glue_task.validation_split if arguments.glue_task else "validation"
    )
    if task_type == "ner":
        return _load_ner(arguments, dataset_dict, eval_split, given)
    columns = (*arguments.resolved_text_columns(), arguments.label_column)
    splits = []
    for role, path, split, limit in (
        ("--train_file", arguments.train_file, "train", arguments.max_train_samples),
        ("--validation_file", arguments.validation_file, eval_split, arguments.max_eval_samples),
    ):
        if dataset_dict is not None:
            if split == eval_split and split not in dataset_dict:
                splits.append(None)
                continue
            data, lines, source = _dataset_split(dataset_dict, split, arguments, columns)
            splits.append((*_truncate(data, lines, limit), source))
        elif path is None:
            splits.append(None)
        else:
            data, lines, source = _table_split(path, role, arguments)
            splits.append((*_truncate(data, lines, limit), source))
    label = arguments.label_column
    train, evaluation = splits
    if task_type == "regression":
        names = None
        for split in (train, evaluation):
            if split is not None:
                split[0][label] = _regression_values(split[0][label], split[1], split[2], label)
    else:
        class_names = _class_label_names(dataset_dict, label) if dataset_dict is not None else None
        if class_names is not None and given is None:
            names = class_names  # a ClassLabel column already holds ids
        else:
            names = build_label_maps(
                [str(value) for value in train[0][label]],
                [str(value) for value in evaluation[0][label]] if evaluation else [],
                given or _task_label_order(train[0][label], arguments.glue_task),
                (train[2], evaluation[2] if evaluation else ""),
                is_tags=False,
            )
            index = {name: position for position, name in enumerate(names)}
            for split in (train, evaluation):
                if split is not None:
                    split[0][label] = [index[str(value)] for value in split[0][label]]
            if given is None:
                names = conventional_names(names, arguments.glue_task)
    words = text_word_limit(arguments.resolved_max_seq_length())
    built = [
        None
        if split is None
        else datasets.Dataset.from_dict(
            {
                **{column: [cut_to_words(text, words) for text in split[0][column]] for column in columns[:-1]},
                "label": split[0][label],
            }
        )
        for split in (train, evaluation)
    ]
    return LabeledSplits(built[0], built[1], task_type, names, arguments.resolved_text_columns())


def load_unlabeled_examples(
    path: str | Path, arguments: FinetuneDataArguments, splits: LabeledSplits
) -> datasets.Dataset:
    """``--unlabeled_file``'s examples (``path``) with the columns of ``splits.train`` — words or text cut as at load,
    and a placeholder ``label`` (the first class, 0.0, or every word's ``O``) that the teacher's prediction replaces,
    as it does a perturbed copy's. A table needs the text column(s) only; any other column is ignored."""
    if splits.task_type == "ner":
        sentences, _ = read_conll(path, "--unlabeled_file", tagged=False)
        words = arguments.resolved_max_seq_length()
        outside = splits.label_names.index("O") if "O" in splits.label_names else 0
        return datasets.Dataset.from_dict(
            {
                "tokens": [sentence[:words] for sentence in sentences],
                "label": [[outside] * len(sentence[:words]) for sentence in sentences],
            },
            features=splits.train.features,
        )
    rows, lines = read_table(path, "--unlabeled_file")
    columns = list(rows[0])
    missing = [column for column in splits.text_columns if column not in columns]
    if missing:
        raise ValueError(
            f"--unlabeled_file: {path} has no column {', '.join(map(repr, missing))}; its columns: {columns} (it "
            f"needs the training data's text column(s): {', '.join(splits.text_columns)})."
        )
    data = {column: [row.get(column) for row in rows] for column in splits.text_columns}
    check_rows(data, lines, str(path), splits.text_columns, None)
    words = text_word_limit(arguments.resolved_max_seq_length())
    placeholder = 0.0 if splits.task_type == "regression" else 0
    return datasets.Dataset.from_dict(
        {
            **{column: [cut_to_words(text, words) for text in data[column]] for column in splits.text_columns},
            "label": [placeholder] * len(rows),
        },
        features=splits.train.features,
    )


def text_word_limit(max_length: int) -> int:
    """How many whitespace-separated words of a text field are kept: twice the model's tokens, with room to spare —
    every word gives at least one token, so what the tokenizer keeps of the field is the same."""
    return 2 * max_length + 16


def cut_to_words(text, words: int):
    """``text`` up to the end of its ``words``-th whitespace-separated word (a non-string, e.g. a missing value, as
    it is). Fields are cut at load, before copies are made of them or they are tokenized: a 50 MB field would
    otherwise be perturbed, copied and tokenized whole, to keep 128 of its tokens."""
    if not isinstance(text, str) or len(text) <= words:  # fewer characters than words: nothing to cut
        return text
    for count, match in enumerate(_WORD.finditer(text), start=1):
        if count == words:
            return text[: match.end()]
    return text


_WORD = re.compile(r"\S+")


def _load_ner(arguments, dataset_dict, eval_split: str, given: list[str] | None) -> LabeledSplits:
    splits = []
    if dataset_dict is None:
        for role, path, limit in (
            ("--train_file", arguments.train_file, arguments.max_train_samples),
            ("--validation_file", arguments.validation_file, arguments.max_eval_samples),
        ):
            if path is None:
                splits.append(None)
                continue
            words, tags = read_conll(path, role)
            splits.append((words[:limit] if limit else words, tags[:limit] if limit else tags, str(path)))
        class_names = None
    else:
        columns = (arguments.token_column, arguments.tag_column)
        for split, limit in (("train", arguments.max_train_samples), (eval_split, arguments.max_eval_samples)):
            if split == eval_split and split not in dataset_dict:
                splits.append(None)
                continue
            data, _, source = _dataset_split(dataset_dict, split, arguments, columns)
            words, tags = data[arguments.token_column], data[arguments.tag_column]
            splits.append((words[:limit] if limit else words, tags[:limit] if limit else tags, source))
        class_names = _class_label_names(dataset_dict, arguments.tag_column)
    if class_names is not None:  # ClassLabel ids → names, so that one path checks and maps them
        splits = [
            None if split is None else (split[0], [[class_names[tag] for tag in tags] for tags in split[1]], split[2])
            for split in splits
        ]
    train, evaluation = splits
    for split in splits:
        if split is not None:
            check_tag_scheme({tag for tags in split[1] for tag in tags}, split[2])
    names = build_label_maps(
        [tag for tags in train[1] for tag in tags],
        [tag for tags in evaluation[1] for tag in tags] if evaluation else [],
        given or class_names,
        (train[2], evaluation[2] if evaluation else ""),
        is_tags=True,
    )
    index = {name: position for position, name in enumerate(names)}
    # every word gives at least one token: words past the model's length are never seen, and are cut at load
    words = arguments.resolved_max_seq_length()
    built = [
        None
        if split is None
        else datasets.Dataset.from_dict(
            {
                "tokens": [sentence[:words] for sentence in split[0]],
                "label": [[index[tag] for tag in tags[:words]] for tags in split[1]],
            }
        )
        for split in splits
    ]
    return LabeledSplits(built[0], built[1], "ner", names, ("tokens",))


# -------------------------------------------------------------------------------------------------- tokenizing
def align_labels_with_words(word_ids: list[int | None], word_labels: list[int]) -> list[int]:
    """Token labels from word labels: the first sub-token of each word carries its word's label; the other
    sub-tokens and special tokens (word id ``None``) get -100, which the loss and the metric ignore."""
    aligned = []
    previous = None
    for word_id in word_ids:
        aligned.append(-100 if word_id is None or word_id == previous else word_labels[word_id])
        previous = word_id
    return aligned


def _require_fast(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"NER needs a fast tokenizer (for word_ids()); {type(tokenizer).__name__} is not one.")


def tokenize_token_dataset(dataset: datasets.Dataset, tokenizer, max_length: int) -> datasets.Dataset:
    """Words → truncated token ids with aligned ``labels`` (see ``align_labels_with_words``)."""
    _require_fast(tokenizer)

    def encode(batch):
        encoded = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_length)
        encoded["labels"] = [
            align_labels_with_words(encoded.word_ids(index), labels) for index, labels in enumerate(batch["label"])
        ]
        return encoded

    return dataset.map(encode, batched=True, remove_columns=dataset.column_names)


def tokenize_sequence_dataset(
    dataset: datasets.Dataset, tokenizer, text_columns: tuple[str, ...], max_length: int
) -> datasets.Dataset:
    """Sentence or sentence pair → truncated token ids; ``label`` becomes ``labels``."""

    def encode(batch):
        texts = [[str(text) if text is not None else "" for text in batch[column]] for column in text_columns]
        encoded = tokenizer(*texts, truncation=True, max_length=max_length)
        encoded["labels"] = batch["label"]
        return encoded

    return dataset.map(encode, batched=True, remove_columns=dataset.column_names)
