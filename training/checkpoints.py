"""Crash-safe checkpoints: a manifest marks a ``checkpoint-N`` folder complete, and resuming picks a complete one.

Trainer writes a checkpoint file by file (weights, optimizer, scheduler, RNG states, ``trainer_state.json``) with
nothing that says the folder is finished: a kill or a full disk leaves a folder that looks like any other, and
``resume_from_checkpoint=True`` takes the highest-numbered one and fails inside a file reader. Here every
checkpoint gets ``compact_bert_manifest.json`` (each file's size and sha256, the training method, the model's
identifying config fields), written atomically only after Trainer has written and we have fsynced every file.
Only a folder whose files match its manifest counts as complete; resuming verifies it and checks that the run
asking is the same kind of run (method, model shape) and has steps left to train.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from pathlib import Path

from accelerate import PartialState
from transformers import TrainerCallback

__all__ = [
    "MANIFEST_NAME",
    "file_sha256",
    "CheckpointManifestCallback",
    "checkpoint_problem",
    "resolve_resume_checkpoint",
    "run_identity",
    "write_manifest",
]

logger = logging.getLogger(__name__)

MANIFEST_NAME = "compact_bert_manifest.json"
MANIFEST_FORMAT = 1
_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")
# Config fields that fix the shapes of the weights and of the optimizer state: a checkpoint whose model differs in
# one of them cannot be loaded into this run's model (torch would fail with a size-mismatch message).
IDENTITY_CONFIG_FIELDS = (
    "model_type",
    "vocab_size",
    "type_vocab_size",
    "max_position_embeddings",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "moe_intermediate_size",
    "embedding_size",
    "intra_bottleneck_size",
    "use_bottleneck",
    "num_feedforward_networks",
    "num_experts",
    "num_attention_experts",
    "num_labels",
)
_CHUNK = 1 << 20


def run_identity(trainer) -> dict:
    """What a checkpoint must share with the run that resumes it: the trainer class (each method has its own
    optimizer parameter groups and training state), the model class (heads, PEFT wrapping) and the config fields
    that fix the weights' shapes."""
    model = trainer.model
    config = getattr(model, "config", None)
    fields = {}
    for name in IDENTITY_CONFIG_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, (bool, int, float, str)):
            fields[name] = value
    return {"training_method": type(trainer).__name__, "model_class": type(model).__name__, "model_config": fields}


def _checkpoint_step(folder: Path) -> int | None:
    match = _CHECKPOINT_NAME.match(folder.name)
    return int(match.group(1)) if match else None


def _numbered_checkpoints(output_dir: Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir``, oldest step first."""
    if not output_dir.is_dir():
        return []
    folders = [path for path in output_dir.iterdir() if path.is_dir() and _checkpoint_step(path) is not None]
    return sorted(folders, key=_checkpoint_step)


def _checkpoint_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file() and not path.name.startswith(MANIFEST_NAME))


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_manifest(folder: Path, identity: dict, global_step: int) -> Path:
    """Make every file of ``folder`` durable, then record them in the manifest (temporary file, fsync, rename):
    the manifest exists only once everything it lists is on disk, and it is never seen half written."""
    files = _checkpoint_files(folder)
    for path in files:
        _fsync(path)
    for directory in {path.parent for path in files} | {folder}:
        _fsync(directory)
    manifest = {
        "format": MANIFEST_FORMAT,
        "global_step": global_step,
        **identity,
        "files": {
            path.relative_to(folder).as_posix(): {"size": path.stat().st_size, "sha256": file_sha256(path)}
            for path in files
        },
    }
    temporary = folder / f"{MANIFEST_NAME}.tmp"
    with temporary.open("w", encoding="utf-8") as stream:
        stream.write(json.dumps(manifest, indent=1) + "\n")
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, folder / MANIFEST_NAME)
    _fsync(folder)
    return folder / MANIFEST_NAME


def _read_manifest(folder: Path) -> tuple[dict | None, str | None]:
    path = folder / MANIFEST_NAME
    if not path.is_file():
        return None, (
            f"it has no {MANIFEST_NAME}: its save never finished (interrupted, or the disk was full), or "
            "it was not written by compact-bert"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"its {MANIFEST_NAME} is unreadable ({error})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None, f"its {MANIFEST_NAME} lists no files"
    return manifest, None


def checkpoint_problem(folder: Path) -> str | None:
    """Why ``folder`` is not a complete checkpoint (a missing, truncated or altered file, no manifest), or None."""
    manifest, problem = _read_manifest(folder)
    if problem:
        return problem
    if "trainer_state.json" not in manifest["files"]:
        return f"its {MANIFEST_NAME} lists no trainer_state.json"
    for name, recorded in sorted(manifest["files"].items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        size = path.stat().st_size
        if size != recorded.get("size"):
            return f"{name} has {size} bytes, the manifest records {recorded.get('size')} (truncated or rewritten)"
        if file_sha256(path) != recorded.get("sha256"):
            return f"{name} does not match the sha256 recorded in the manifest (corrupted or rewritten)"
    return None


def _identity_differences(manifest: dict, identity: dict) -> list[str]:
    differences = []
    for key, what in (("training_method", "trainer (method)"), ("model_class", "model class")):
        if manifest.get(key) != identity[key]:
            differences.append(f"{what}: checkpoint {manifest.get(key)}, this run {identity[key]}")
    recorded = manifest.get("model_config") or {}
    for name, value in identity["model_config"].items():
        if name in recorded and recorded[name] != value:
            differences.append(f"{name}: checkpoint {recorded[name]!r}, this run {value!r}")
    return differences


def _check_resumable(folder: Path, identity: dict, max_steps: int) -> None:
    manifest, _ = _read_manifest(folder)
    differences = _identity_differences(manifest, identity)
    if differences:
        raise ValueError(
            f"{folder} belongs to another kind of run and cannot be resumed by this one: "
            + "; ".join(differences)
            + ". Resume it with the command and model settings that wrote it, "
            "or train into a new --output_dir."
        )
    step = _manifest_step(folder, manifest)
    if max_steps > 0 and step == max_steps and not (folder.parent / "run_summary.json").is_file():
        # The run trained every step but never wrote its summary: it was stopped during the final save. Resuming
        # trains nothing and completes that save (model, tokenizer, evaluation, summary, card).
        logger.warning("%s is at --max_steps %d but the run's final save did not finish: completing it.", folder, step)
        return
    if max_steps > 0 and step >= max_steps:
        raise ValueError(
            f"{folder} is at step {step}, which is not below --max_steps {max_steps}: nothing is left to "
            f"train. Raise --max_steps above {step}, or train into a new --output_dir."
        )


def completes_final_save(checkpoint: str | Path | None, max_steps: int) -> bool:
    """Whether resuming from ``checkpoint`` trains nothing and only completes an interrupted final save (see
    ``resolve_resume_checkpoint``): it is at ``max_steps``."""
    if checkpoint is None or max_steps <= 0:
        return False
    return _manifest_step(Path(checkpoint), _read_manifest(Path(checkpoint))[0]) >= max_steps


def _manifest_step(folder: Path, manifest: dict | None) -> int:
    """The optimizer step a checkpoint was saved at: its manifest's, else the one in its folder name."""
    return int((manifest or {}).get("global_step", _checkpoint_step(folder) or 0))


def resolve_resume_checkpoint(
    output_dir: str | Path, requested: str | None, identity: dict, max_steps: int
) -> str | None:
    """The verified checkpoint folder to resume from, or None to start fresh.

    ``requested`` is ``--resume_from_checkpoint``: None/empty (start fresh), ``last``/``true`` (the newest
    complete ``checkpoint-N`` of ``output_dir``; every newer incomplete one is logged with the reason it was
    skipped) or a folder (which must be complete). Raises ``ValueError`` naming the folder and what is wrong
    when nothing complete exists, or the checkpoint comes from another method or model shape, or it is already
    at or past ``max_steps`` (when positive) — except a checkpoint at ``max_steps`` in a folder without its run
    summary, where the run was stopped during its final save: resuming from it completes that save."""
    if requested is None or str(requested).strip() == "":
        return None
    output_dir = Path(output_dir)
    if str(requested).lower() in ("last", "true"):
        skipped = []
        chosen = None
        for folder in reversed(_numbered_checkpoints(output_dir)):
            problem = checkpoint_problem(folder)
            if problem is None:
                chosen = folder
                break
            skipped.append(f"{folder.name} ({problem})")
            logger.warning("Not resuming from %s: %s.", folder, problem)
        if chosen is None:
            found = f"; skipped: {'; '.join(skipped)}" if skipped else ""
            raise ValueError(
                f"no complete checkpoint-N folder in {output_dir} to resume from{found}. Start without "
                "--resume_from_checkpoint, or name a complete checkpoint folder."
            )
    else:
        chosen = Path(requested)
        if not chosen.is_dir():
            raise ValueError(f"{chosen} is not a folder; pass a checkpoint-N folder, or 'last'.")
        problem = checkpoint_problem(chosen)
        if problem is not None:
            raise ValueError(f"{chosen} is not a complete checkpoint: {problem}.")
    _check_resumable(chosen, identity, max_steps)
    logger.info("Resuming from %s (verified against its manifest).", chosen)
    return str(chosen)


class CheckpointManifestCallback(TrainerCallback):
    """Writes the manifest of each checkpoint once Trainer has saved it, then applies ``save_total_limit``
    itself, counting only complete checkpoints.

    Trainer rotates old checkpoints inside its save, before any callback runs: with ``save_total_limit=1`` it
    would delete the last complete checkpoint while the new one has no manifest yet, and a kill in between left
    nothing to resume. So for the duration of training this callback takes ``save_total_limit`` over (Trainer's
    own is set to None at ``on_train_begin`` and given back at ``on_train_end``) and deletes old checkpoints only
    after the new one is complete, keeping the newest ``save_total_limit`` complete ones and the best one."""

    def __init__(self, identity: dict):
        self.identity = identity
        self.save_total_limit: int | None = None
        self._owns_rotation = False

    def on_train_begin(self, args, state, control, **kwargs):
        if not self._owns_rotation:  # on_train_begin runs again when auto_find_batch_size retries
            self.save_total_limit, args.save_total_limit = args.save_total_limit, None
            self._owns_rotation = True

    def on_train_end(self, args, state, control, **kwargs):
        self.give_back_rotation(args)

    def give_back_rotation(self, args) -> None:
        """Restore ``args.save_total_limit``; also for a run that ended with an exception (no on_train_end)."""
        if self._owns_rotation:
            args.save_total_limit = self.save_total_limit
            self._owns_rotation = False

    def on_save(self, args, state, control, **kwargs):
        PartialState().wait_for_everyone()  # every process has written its RNG state into the folder
        if not args.should_save:
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if not folder.is_dir():
            logger.warning("No %s after a save (hyperparameter search?): no manifest written.", folder)
            return
        write_manifest(folder, self.identity, state.global_step)
        self._rotate(Path(args.output_dir), state.best_model_checkpoint)

    def _rotate(self, output_dir: Path, best_model_checkpoint: str | None) -> None:
        if not self.save_total_limit or self.save_total_limit <= 0:
            return
        checkpoints = _numbered_checkpoints(output_dir)
        complete = [folder for folder in checkpoints if (folder / MANIFEST_NAME).is_file()]
        if not complete:
            return
        keep = set(complete[-self.save_total_limit :])
        if best_model_checkpoint:
            keep.add(Path(best_model_checkpoint))
        newest_complete_step = _checkpoint_step(complete[-1])
        for folder in checkpoints:
            if folder not in keep and _checkpoint_step(folder) < newest_complete_step:
                logger.info("Deleting older checkpoint %s (save_total_limit %d)", folder, self.save_total_limit)
                shutil.rmtree(folder, ignore_errors=True)
