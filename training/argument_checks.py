"""Checks every training command runs on its TrainingArguments right after parsing, before models or data are
built: a batch size or accumulation of 0 would otherwise fail deep in torch, ``--max_steps 0`` would train
anyway, and an output folder that cannot be written would fail only when the trained model is saved."""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path

from transformers import TrainingArguments

from .output_folders import check_named_output_file
from .run_errors import RunSettingsError

__all__ = [
    "check_finite_numbers",
    "check_output_dir_creatable",
    "check_output_file",
    "check_output_dir",
    "check_training_arguments",
]

_AT_LEAST_ONE = ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps")


def check_finite_numbers(arguments) -> None:
    """Refuse a number flag given as ``nan`` or ``inf`` (argparse's ``float`` takes both): a learning rate, a loss
    weight or a temperature that is not finite would only show as a diverged run after the expensive part. Checked
    on every float field of a command's parsed arguments, lists included."""
    for field in dataclasses.fields(arguments):
        value = getattr(arguments, field.name, None)
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if isinstance(item, float) and not math.isfinite(item):
                raise RunSettingsError(f"--{field.name} must be a finite number, got {item}.")


def check_training_arguments(args: TrainingArguments) -> None:
    """Batch sizes and accumulation >= 1; ``max_steps`` >= 1, or -1 (transformers' default: train for
    ``num_train_epochs``, which must then be > 0); a seed NumPy accepts, a non-negative learning rate and a
    non-negative weight decay (refused before the teacher, the student and the data are built); a non-empty,
    writable ``output_dir``; no ``--push_to_hub`` (it would ship a pickle)."""
    for name in _AT_LEAST_ONE:
        value = getattr(args, name)
        if value is None or value < 1:
            raise RunSettingsError(f"--{name} must be >= 1, got {value}.")
    if args.max_steps == 0 or args.max_steps < -1:
        raise RunSettingsError(
            f"--max_steps must be a number of optimizer steps >= 1, or -1 to train for --num_train_epochs instead, "
            f"got {args.max_steps}."
        )
    if args.max_steps == -1 and not args.num_train_epochs > 0:
        raise RunSettingsError(
            f"--num_train_epochs must be > 0 when training by epochs (--max_steps -1), got {args.num_train_epochs}; "
            "or give --max_steps."
        )
    if not 0 <= args.seed < 2**32:
        raise RunSettingsError(
            f"--seed must be in [0, 2**32 - 1] (NumPy's and PyTorch's seed range), got {args.seed}."
        )
    if not args.learning_rate >= 0:  # NaN fails too; 0 is allowed (a run that evaluates without learning)
        raise RunSettingsError(f"--learning_rate must be >= 0, got {args.learning_rate}.")
    if args.weight_decay < 0:
        raise RunSettingsError(f"--weight_decay must be >= 0, got {args.weight_decay}.")
    if args.output_dir is not None and not str(args.output_dir).strip():
        raise RunSettingsError("--output_dir is empty; give the path of a folder (created if missing).")
    if args.push_to_hub:
        raise RunSettingsError(
            "--push_to_hub is not supported: Trainer's push uploads the output folder with its pickled "
            "training_args.bin, checkpoints and logs. Train without it, then push the finished model folder with "
            "`compact-bert push OUTPUT_DIR REPO_ID` (weights, config, tokenizer, remote code and model card only)."
        )
    check_output_dir(args.output_dir, "output_dir")


def check_output_file(path: str | Path | None, flag: str) -> None:
    """``path`` can be written as a file: not a folder, not a file of a model folder (``output_folders``), its folder
    exists (or can be created) and is writable. Checked before a command's expensive part, so that its result is not
    lost at the end."""
    if path is None:
        return
    file = Path(path)
    if file.is_dir():
        raise RunSettingsError(f"--{flag} {file} is a folder; give the path of a file to write.")
    check_named_output_file(file, f"--{flag}")
    check_output_dir_creatable(file.parent, flag)


def check_output_dir_creatable(path: str | Path, flag: str) -> None:
    """``path`` is a writable folder, or can be created as one; tried for real (the missing folders made, a file
    written, then all of it removed again), so that a command failing later on its other checks leaves nothing
    behind and read-only mounts or ``/proc`` are caught where ``os.access`` would say yes."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise RunSettingsError(f"--{flag} {folder} is a file, not a folder; give the path of a folder.")
    existing = next((candidate for candidate in (folder, *folder.parents) if candidate.exists()), None)
    if existing is None or not existing.is_dir():
        raise RunSettingsError(f"--{flag} {folder} cannot be created: {existing} is a file, not a folder.")
    missing = [candidate for candidate in (folder, *folder.parents) if not candidate.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as error:
        what = "is not writable" if not missing else "cannot be created"
        raise RunSettingsError(
            f"--{flag} {folder} {what} ({error.strerror or error}); choose a folder you can write to."
        ) from None
    finally:
        for created in missing:  # deepest first
            if created.exists():
                created.rmdir()


def _require_utf8_path(path: Path, flag: str) -> None:
    """A path holding a byte that is not UTF-8 (Python keeps it as a surrogate escape) cannot be passed to the
    tokenizers library, which would fail at the first checkpoint's tokenizer save, leaving a half checkpoint."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError as error:
        shown = str(path).encode("utf-8", "surrogateescape")
        raise RunSettingsError(
            f"--{flag} {shown!r} holds the byte {shown[error.start : error.start + 1]!r}, which is not UTF-8: "
            "the tokenizer could not be saved there. Choose a folder whose name is UTF-8."
        ) from None


def check_output_dir(path: str | Path | None, flag: str) -> None:
    """``path`` is, or can be created as, a folder this process can write to. The folder is created here (the
    Trainer would create it anyway) and a temporary file written and removed in it, which also catches
    read-only file systems and permissions that ``os.access`` misjudges."""
    if path is None:
        return
    folder = Path(path)
    _require_utf8_path(folder, flag)
    if folder.exists() and not folder.is_dir():
        raise RunSettingsError(
            f"--{flag} {folder} is a file, not a folder; give the path of a folder (created if missing)."
        )
    blocking = next((parent for parent in folder.parents if parent.exists() and not parent.is_dir()), None)
    if blocking is not None:
        raise RunSettingsError(f"--{flag} {folder} cannot be created: {blocking} is a file, not a folder.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise RunSettingsError(
            f"--{flag} {folder} is not writable ({reason}); choose a folder you can write to, so that the trained "
            "model can be saved."
        ) from None
