"""An on-disk cache of a teacher's outputs over a tokenized data set, computed once and reused.

Task distillation reads the fine-tuned teacher's logits for every training example. They depend only on the
teacher's weights, its tokenizer, the examples and the maximum length, so one computation serves every seed,
every point of a grid and every student. Each entry is a folder named by the SHA-256 fingerprint of those four
inputs (and the format version), so a change to any of them selects another entry: a stale entry is never read.

Writes are atomic: the outputs go to a temporary folder that is renamed into place only after its manifest (the
fingerprint, the shapes and the SHA-256 of the tensor file) is complete. A folder without a manifest — a write that
was interrupted — is never read as complete: it is rebuilt. A folder whose tensor file no longer matches its
manifest (truncated or edited after it was written) is refused with its path, before training starts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..training.cache_folder import compact_bert_cache_root
from ..training.checkpoints import file_sha256
from ..training.run_errors import RunSettingsError

__all__ = [
    "CACHE_FORMAT",
    "TeacherCacheError",
    "cached_teacher_outputs",
    "data_fingerprint",
    "default_cache_dir",
    "teacher_fingerprint",
    "tokenizer_fingerprint",
]

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1
_TENSORS_FILE = "outputs.safetensors"
_MANIFEST_FILE = "manifest.json"


class TeacherCacheError(RunSettingsError):
    """A cache entry cannot be trusted, or the cache cannot be written; the message names the folder and the fix."""


def default_cache_dir() -> Path:
    """The teacher-output entries: ``teacher_outputs`` under ``compact_bert_cache_root()``."""
    return compact_bert_cache_root() / "teacher_outputs"


def teacher_fingerprint(model: torch.nn.Module) -> str:
    """SHA-256 of the teacher's class, config and every tensor of its state dict (names, dtypes, shapes, bytes)."""
    digest = hashlib.sha256()
    digest.update(type(model).__name__.encode())
    digest.update(model.config.to_json_string(use_diff=False).encode())
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of the tokenizer's class, vocabulary, special tokens and lower-casing: what maps text to ids."""
    state = {
        "class": type(tokenizer).__name__,
        "vocab": sorted(tokenizer.get_vocab().items()),
        "special": {name: str(value) for name, value in sorted(tokenizer.special_tokens_map.items())},
        "lower": getattr(tokenizer, "do_lower_case", None),
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def data_fingerprint(dataset, columns: tuple[str, ...] = ("input_ids", "token_type_ids", "attention_mask")) -> str:
    """SHA-256 of the model-input columns of a tokenized ``datasets.Dataset`` (or list of dicts), in order."""
    digest = hashlib.sha256()
    names = [
        name for name in columns if name in (dataset.column_names if hasattr(dataset, "column_names") else dataset[0])
    ]
    digest.update(",".join(names).encode())
    for example in dataset:
        for name in names:
            digest.update(json.dumps(example[name]).encode())
        digest.update(b";")
    return digest.hexdigest()


@dataclass
class CacheResult:
    outputs: dict[str, torch.Tensor]
    folder: Path
    reused: bool


def cached_teacher_outputs(
    compute: Callable[[], dict[str, torch.Tensor]],
    fingerprints: dict[str, str | int],
    cache_dir: str | Path | None = None,
) -> CacheResult:
    """The teacher outputs for ``fingerprints`` (teacher, tokenizer, data, max_length, kind ...) from the cache, or
    ``compute()``'d and stored. ``cache_dir=None`` uses ``default_cache_dir()``."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key_source = json.dumps({"format": CACHE_FORMAT, **fingerprints}, sort_keys=True)
    key = hashlib.sha256(key_source.encode()).hexdigest()[:32]
    folder = root / key
    manifest_path = folder / _MANIFEST_FILE
    if folder.is_dir() and manifest_path.is_file():
        return CacheResult(_read_entry(folder, key_source), folder, True)
    _check_writable(root, explicit=cache_dir is not None)  # before the teacher runs, not after
    if folder.is_dir():  # no manifest: a write that never finished
        logger.warning("Teacher-output cache %s is incomplete (no %s): rebuilding it.", folder, _MANIFEST_FILE)
        shutil.rmtree(folder, ignore_errors=True)
    outputs = {name: tensor.detach().cpu().contiguous() for name, tensor in compute().items()}
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        save_file(outputs, str(staging / _TENSORS_FILE))
        manifest = {
            "format": CACHE_FORMAT,
            "key_source": key_source,
            "tensors_sha256": file_sha256(staging / _TENSORS_FILE),
            "shapes": {name: list(tensor.shape) for name, tensor in outputs.items()},
        }
        (staging / _MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        try:
            os.replace(staging, folder)
        except OSError:  # another process completed the same entry meanwhile: theirs is as good as ours
            if not manifest_path.is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CacheResult(outputs, folder, False)


def _check_writable(root: Path, explicit: bool) -> None:
    """``root`` exists (or is made) and takes a file; otherwise a ``TeacherCacheError`` naming it and the setting
    that moves it (the flag when the caller named the folder, else ``$COMPACT_BERT_CACHE``)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root, prefix=".write-check-"):
            pass
    except OSError as error:
        setting = (
            "give --teacher_cache_dir a folder you can write to"
            if explicit
            else "set $COMPACT_BERT_CACHE (or --teacher_cache_dir) to a folder you can write to"
        )
        raise TeacherCacheError(
            f"The teacher-output cache {root} cannot be written ({error.strerror or error}): {setting}."
        ) from None


def _read_entry(folder: Path, key_source: str) -> dict[str, torch.Tensor]:
    manifest_path, tensors_path = folder / _MANIFEST_FILE, folder / _TENSORS_FILE
    rebuild = f"delete {folder} to rebuild it"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TeacherCacheError(
            f"Teacher-output cache {manifest_path} is not valid JSON ({error}); {rebuild}."
        ) from None
    if manifest.get("format") != CACHE_FORMAT or manifest.get("key_source") != key_source:
        raise TeacherCacheError(
            f"Teacher-output cache {folder} was written for other inputs (format {manifest.get('format')}, "
            f"expected {CACHE_FORMAT}); {rebuild}."
        )
    if not tensors_path.is_file() or file_sha256(tensors_path) != manifest.get("tensors_sha256"):
        raise TeacherCacheError(
            f"Teacher-output cache {tensors_path} does not match its manifest (missing, truncated or modified after "
            f"it was written); {rebuild}."
        )
    outputs = load_file(str(tensors_path))
    shapes = {name: list(tensor.shape) for name, tensor in outputs.items()}
    if shapes != manifest.get("shapes"):
        raise TeacherCacheError(
            f"Teacher-output cache {tensors_path} holds shapes {shapes}, its manifest "
            f"{manifest.get('shapes')}; {rebuild}."
        )
    return outputs
