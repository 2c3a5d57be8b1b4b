"""A run owns its output folder: one process writes into it at a time, and a fresh run never mixes its checkpoints
with an earlier run's.

Trainer rotates (``save_total_limit``) and resumes (``--resume_from_checkpoint last``) by the ``checkpoint-N`` names
in the folder, whoever wrote them. A run started again in the same folder with new settings would delete its own
new checkpoints as "older" than the earlier run's higher-numbered ones, and, killed and resumed, continue the
earlier run's weights. Such a run is refused before any work unless the user passes ``--overwrite_output_dir``
(``output_folders``); then, since it does not resume, it moves the earlier run's checkpoints aside
(``superseded-checkpoints-<time>/``, named on the console) before it trains. Two processes started into one folder
would delete each other's checkpoints: a lock file (``.compact-bert-run.lock``: the owner's pid and host) refuses the
second while the first is alive; a lock whose process is gone (a killed run) is taken over, so it never stays stuck.
A lock written on another host (a shared folder) is refused with its host, pid and start time: whether that process
is alive cannot be told from here, and taking it over could let two runs delete each other's checkpoints.

A run that finished leaves a model folder, not a training folder: its checkpoints (weights plus optimizer state,
twice the model each) are what an interrupted run resumes from, so once the final model, tokenizer, summary and card
are written they are removed (``--keep_checkpoints true`` keeps them, e.g. to continue training later). A user who
copies or shares the folder then copies only what loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

from .run_errors import RunSettingsError

__all__ = [
    "LOCK_FILE",
    "OutputFolderInUseError",
    "move_aside_earlier_checkpoints",
    "owned_output_folder",
    "remove_finished_checkpoints",
]

LOCK_FILE = ".compact-bert-run.lock"


class OutputFolderInUseError(RunSettingsError):
    """Another live process is writing into the output folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def _acquire(folder: Path) -> Path:
    path = folder / LOCK_FILE
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                owner = json.loads(path.read_text())
            except (OSError, ValueError):
                owner = {}
            pid, host = owner.get("pid"), owner.get("host")
            if isinstance(pid, int) and pid != os.getpid() and host == record["host"] and _alive(pid):
                raise OutputFolderInUseError(
                    f"--output_dir {folder} is in use by another compact-bert run (pid {pid}, started "
                    f"{owner.get('started', '?')}): two runs in one folder would delete each other's checkpoints. "
                    "Wait for it to finish or choose another --output_dir."
                ) from None
            if isinstance(host, str) and host != record["host"]:
                raise OutputFolderInUseError(
                    f"--output_dir {folder} holds the lock of a compact-bert run on host {host} (pid {pid}, started "
                    f"{owner.get('started', '?')}), a shared folder: from {record['host']} it cannot be told whether "
                    f"that run is alive. Wait for it to finish, or remove {path} if it is gone, or choose another "
                    "--output_dir."
                ) from None
            path.unlink(missing_ok=True)  # left by a run of this host that is gone (or by this process): take it over
            continue
        with os.fdopen(descriptor, "w") as handle:
            json.dump(record, handle)
        return path
    raise OutputFolderInUseError(f"--output_dir {folder}: could not take its lock file {path}.")


def _checkpoints(folder: Path) -> list[Path]:
    return sorted(path for path in folder.glob("checkpoint-*") if path.is_dir() and path.name[11:].isdigit())


def remove_finished_checkpoints(folder: str | Path) -> int:
    """Remove a finished run's ``checkpoint-N`` folders from ``folder``; say so in one line; return how many."""
    folder = Path(folder)
    finished = _checkpoints(folder)
    if not finished:
        return 0
    size = sum(path.stat().st_size for checkpoint in finished for path in checkpoint.rglob("*") if path.is_file())
    for checkpoint in finished:
        shutil.rmtree(checkpoint)
    print(
        f"Removed {len(finished)} checkpoint(s) ({size / 1e6:.1f} MB) from {folder}: the final model is saved "
        "(--keep_checkpoints true keeps them)."
    )
    return len(finished)


def move_aside_earlier_checkpoints(folder: Path) -> Path | None:
    """Move the ``checkpoint-N`` folders of an earlier run into ``superseded-checkpoints-<time>/``; return it."""
    earlier = _checkpoints(folder)
    if not earlier:
        return None
    target = folder / f"superseded-checkpoints-{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir()
    for path in earlier:
        path.rename(target / path.name)
    print(
        f"Moved {len(earlier)} checkpoint(s) of an earlier run in {folder} aside to {target.name}/: this run starts "
        "fresh (resume an earlier run with --resume_from_checkpoint PATH)."
    )
    return target


@contextlib.contextmanager
def owned_output_folder(output_dir, resuming: bool, is_main_process: bool = True):
    """Hold ``output_dir``'s lock while the block runs (main process only) and, for a run that does not resume,
    move an earlier run's checkpoints aside first."""
    if not is_main_process or output_dir is None:
        yield
        return
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    lock = _acquire(folder)
    try:
        if not resuming:
            move_aside_earlier_checkpoints(folder)
        yield
    finally:
        lock.unlink(missing_ok=True)
