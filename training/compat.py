"""The one place where the trainers and the CLI meet the differences between transformers 4.57 and 5.

Everything else in ``distillation/`` and ``cli/`` uses APIs that both lines share (``processing_class``,
``compute_loss(..., num_items_in_batch)``, ``from_pretrained(dtype=...)``, ``get_scheduler``); what differs
is collected here so that no other module needs a version check.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
import transformers
from packaging import version

from .write_errors import explain_write_errors

__all__ = [
    "FROM_PRETRAINED_KWARGS",
    "TRANSFORMERS_5",
    "WarmupSteps",
    "save_tokenizer",
    "training_keywords",
    "translate_legacy_training_flags",
    "use_eager_attention",
]

logger = logging.getLogger(__name__)

TRANSFORMERS_5 = version.parse(transformers.__version__).major >= 5

# Type of `TrainingArguments.warmup_steps`: a float on 5 (a value below 1 is a ratio of the total steps), an
# int on 4.57 (which has `warmup_ratio` instead). A subclass that changes the default keeps the line's type.
WarmupSteps = float if TRANSFORMERS_5 else int

# transformers 5 loads weights in the checkpoint's dtype by default (`dtype="auto"`), 4.57 in float32. Models
# that are trained (students, assistants) and teachers whose outputs are compared with a float32 student are
# loaded in float32 on both lines; reduced precision comes from `--bf16`/`--fp16` (autocast through
# Accelerate, which also wraps the teacher). `dtype` is accepted by both lines (`torch_dtype` is 4.x only).
FROM_PRETRAINED_KWARGS = {"dtype": torch.float32}


def use_eager_attention(model: torch.nn.Module) -> None:
    """Put every transformers model inside ``model`` (a head, or a wrapper holding one) on eager attention, whose
    probabilities can be returned and whose ONNX graph ONNX Runtime fuses. transformers 5 switches any model; 4.57
    switches those on its attention interface and says, for BERT, that it cannot — where its SDPA attention already
    falls back to eager whenever the probabilities are asked for, and exports a graph ONNX Runtime fuses as well:
    that note is silenced here."""
    from transformers.utils import logging as transformers_logging

    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        for module in model.modules():
            if isinstance(module, transformers.PreTrainedModel) and hasattr(module, "set_attn_implementation"):
                module.set_attn_implementation("eager")
    finally:
        transformers_logging.set_verbosity(verbosity)


def _flag_value(argv: list[str], index: int) -> tuple[str | None, int]:
    """The value of the flag at ``index`` (``--flag value``, ``--flag=value`` or a bare boolean ``--flag``)
    and the number of tokens it spans."""
    token = argv[index]
    if "=" in token:
        return token.split("=", 1)[1], 1
    if index + 1 < len(argv) and not argv[index + 1].startswith("--"):
        return argv[index + 1], 2
    return None, 1


def _is_ratio(value: str | None) -> bool:
    try:
        return value is not None and 0 < float(value) < 1
    except ValueError:
        return False


def training_keywords(values: dict) -> dict:
    """TrainingArguments keywords in the installed line's spelling: ``group_by_length=True`` (4.57) is
    ``train_sampling_strategy="group_by_length"`` on transformers 5 (``translate_legacy_training_flags`` does the
    same for flags)."""
    values = dict(values)
    if TRANSFORMERS_5 and "group_by_length" in values:
        values["train_sampling_strategy"] = "group_by_length" if values.pop("group_by_length") else "random"
    return values


def translate_legacy_training_flags(argv: list[str]) -> list[str]:
    """Rewrite the TrainingArguments flags that one line renamed or removed into what the installed line
    accepts, so that one command line runs on both:

    - ``--evaluation_strategy`` → ``--eval_strategy`` (removed from both lines); ``--no_cuda X`` →
      ``--use_cpu X`` (deprecated in 4.57, removed in 5);
    - transformers 5: ``--warmup_ratio R`` → ``--warmup_steps R``
      (5 reads a value below 1 as a ratio); ``--overwrite_output_dir``, which 5 removed from ``TrainingArguments``,
      passes through unchanged: ``CompactBertTrainingArguments`` declares it on both lines
      (``training/output_folders.py`` acts on it);
    - ``--group_by_length true`` (4.57) and ``--train_sampling_strategy group_by_length`` (5) are each other's
      spelling: batches of similar lengths, less padding;
    - transformers 4.57: ``--warmup_steps R`` with 0 < R < 1 → ``--warmup_ratio R`` (4.57 wants an integer);
      ``--warmup_ratio R`` without whole ``--warmup_steps`` also sets ``--warmup_steps 0``, since 4.57 ignores
      the ratio when warmup_steps (e.g. a config's default) is positive.
    """
    translated: list[str] = []
    explicit_steps = any(
        token.split("=", 1)[0] == "--warmup_steps" and not _is_ratio(_flag_value(argv, position)[0])
        for position, token in enumerate(argv)
    )
    index = 0
    while index < len(argv):
        token = argv[index]
        name = token.split("=", 1)[0]
        value, span = _flag_value(argv, index)
        replacement = name
        if TRANSFORMERS_5 and name == "--group_by_length":
            grouped = value is None or value.lower() in ("true", "1", "yes")
            translated += ["--train_sampling_strategy", "group_by_length" if grouped else "random"]
            index += span
            continue
        if not TRANSFORMERS_5 and name == "--train_sampling_strategy":
            translated += ["--group_by_length", str(value == "group_by_length").lower()]
            index += span
            continue
        if name == "--evaluation_strategy":
            replacement = "--eval_strategy"
        elif name == "--no_cuda":
            replacement = "--use_cpu"
        elif TRANSFORMERS_5 and name == "--warmup_ratio":
            replacement = "--warmup_steps"
        elif not TRANSFORMERS_5 and (name == "--warmup_ratio" or (name == "--warmup_steps" and _is_ratio(value))):
            # 4.57 wants whole warmup steps, and prefers any warmup_steps > 0 (e.g. a config's default) over
            # the ratio the user asked for.
            translated += ["--warmup_ratio", *([value] if value is not None else [])]
            translated += [] if explicit_steps else ["--warmup_steps", "0"]
            index += span
            continue
        if replacement == name:
            translated.append(token)
            index += 1
            continue
        logger.warning("%s is spelled %s in transformers %s; translated.", name, replacement, transformers.__version__)
        translated += [replacement] + ([value] if value is not None else [])
        index += span
    return translated


def save_tokenizer(tokenizer, folder: str | Path) -> None:
    """``tokenizer.save_pretrained`` plus the WordPiece ``vocab.txt`` that transformers 5 no longer writes (it
    saves ``tokenizer.json`` only), so that a saved folder carries the same files on both lines and slow
    tokenizers and other toolchains can read it. A full disk is reported with the folder (``write_errors``)."""
    with explain_write_errors(folder, "Saving the tokenizer to"):
        _write_tokenizer_files(tokenizer, folder)


# Keys ``save_pretrained`` copies into ``tokenizer_config.json`` from how the tokenizer was *loaded*, not what it is:
# transformers 5 records ``is_local`` / ``local_files_only`` of the load call, and both lines copy the fixed
# truncation and padding of a sentence-transformers teacher's ``tokenizer.json`` (128 tokens). Shipped, they tell
# a user's tokenizer that it was loaded offline and cut sentences at 128 tokens.
LOAD_TIME_TOKENIZER_KEYS = (
    "is_local",
    "local_files_only",
    "max_length",
    "stride",
    "truncation_strategy",
    "pad_to_multiple_of",
    "pad_token_type_id",
)


def _write_tokenizer_files(tokenizer, folder: str | Path) -> None:
    tokenizer.save_pretrained(folder)
    _drop_load_time_settings(Path(folder))
    _write_vocabulary(tokenizer, Path(folder))


def _drop_load_time_settings(folder: Path) -> None:
    """Remove ``LOAD_TIME_TOKENIZER_KEYS`` from ``tokenizer_config.json`` and the fixed truncation / padding from
    ``tokenizer.json`` (without the latter the keys come back from it on the next load)."""
    config_path, backend_path = folder / "tokenizer_config.json", folder / "tokenizer.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        kept = {key: value for key, value in config.items() if key not in LOAD_TIME_TOKENIZER_KEYS}
        if kept != config:
            config_path.write_text(json.dumps(kept, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if backend_path.is_file():
        backend = json.loads(backend_path.read_text(encoding="utf-8"))
        if backend.get("truncation") is not None or backend.get("padding") is not None:
            backend["truncation"] = backend["padding"] = None
            backend_path.write_text(json.dumps(backend, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_vocabulary(tokenizer, folder: Path) -> None:
    vocabulary = folder / "vocab.txt"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if vocabulary.exists() or backend is None or type(backend.model).__name__ != "WordPiece":
        return
    tokens = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    if [index for _, index in tokens] != list(range(len(tokens))):
        return  # not one dense id range: a vocab.txt (line number = id) could not represent it
    vocabulary.write_text("".join(f"{token}\n" for token, _ in tokens), encoding="utf-8")
