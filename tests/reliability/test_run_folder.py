"""Runs own their output folders: a second live process is refused, a killed run's lock is taken over, and a fresh
run allowed into an earlier run's folder (``--overwrite_output_dir``) moves its checkpoints aside instead of rotating
them away or resuming them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from compact_bert.cli.main import main
from compact_bert.training.run_folder import LOCK_FILE, OutputFolderInUseError, owned_output_folder
from tests.distillation.test_embedding_distillation import _flags, data  # noqa: F401  (the shared data fixture)


def _lock(folder, pid: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOCK_FILE).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "earlier"}))


def test_a_folder_in_use_by_a_live_process_is_refused_and_a_dead_ones_lock_is_taken_over(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _lock(tmp_path / "out", other.pid)
        with (
            pytest.raises(OutputFolderInUseError, match=rf"is in use by another compact-bert run \(pid {other.pid}"),
            owned_output_folder(tmp_path / "out", resuming=False),
        ):
            pass
    finally:
        other.kill()
        other.wait()
    with owned_output_folder(tmp_path / "out", resuming=False):  # the process is gone: its lock is stale
        assert json.loads((tmp_path / "out" / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert not (tmp_path / "out" / LOCK_FILE).exists()


def test_a_lock_written_on_another_host_is_refused_naming_it_not_taken_over(tmp_path):
    """A shared folder: whether a process on another host is alive cannot be told, so its lock is not taken over."""
    folder = tmp_path / "out"
    folder.mkdir()
    record = {"pid": os.getpid(), "host": "another-host.example", "started": "2026-11-28 10:00:00"}
    (folder / LOCK_FILE).write_text(json.dumps(record))
    refused = r"on host another-host\.example \(pid \d+, started 2026-11-28"
    with pytest.raises(OutputFolderInUseError, match=refused), owned_output_folder(folder, resuming=False):
        pass
    assert json.loads((folder / LOCK_FILE).read_text()) == record  # left as it was


def test_a_fresh_run_moves_an_earlier_runs_checkpoints_aside(data, tmp_path, capsys):  # noqa: F811
    output = tmp_path / "run"
    keep = ["--keep_checkpoints", "true"]
    assert main(_flags(data, output, "--max_steps", "4", "--save_steps", "2", *keep)) == 0
    assert sorted(path.name for path in output.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    capsys.readouterr()
    again = ["--max_steps", "2", "--save_steps", "1", "--save_total_limit", "2", *keep, "--overwrite_output_dir"]
    assert main(_flags(data, output, *again)) == 0  # without the flag it is refused (test_output_folders.py)
    assert "Moved 2 checkpoint(s) of an earlier run" in capsys.readouterr().out
    assert sorted(path.name for path in output.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    aside = next(output.glob("superseded-checkpoints-*"))
    assert sorted(path.name for path in aside.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    state = json.loads((output / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["max_steps"] == 2  # the new run's own checkpoint, not the earlier run's


def test_a_finished_run_leaves_a_model_folder_without_checkpoints(data, tmp_path, capsys):  # noqa: F811
    """Checkpoints (weights + optimizer state) serve an interrupted run; once the final model, summary and card are
    written they go, so that copying the folder copies what loads. ``--keep_checkpoints true`` keeps them."""
    output = tmp_path / "run"
    assert main(_flags(data, output, "--max_steps", "2", "--save_steps", "1")) == 0
    printed = capsys.readouterr().out
    assert "Removed 2 checkpoint(s) (" in printed and f"MB) from {output}: the final model is saved" in printed
    assert not list(output.glob("checkpoint-*"))
    assert {"model.safetensors", "README.md", "run_summary.json", "modules.json"} <= {
        path.name for path in output.iterdir()
    }
    kept = tmp_path / "kept"
    assert main(_flags(data, kept, "--max_steps", "2", "--save_steps", "1", "--keep_checkpoints", "true")) == 0
    assert sorted(path.name for path in kept.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert "Removed" not in capsys.readouterr().out


def test_training_arguments_adjusted_by_a_command_keep_the_keep_checkpoints_choice(tmp_path):
    """``finetune`` (metric for the best model, a run without evaluation, each grid run) and the MiniMoE assistant
    adjust the parsed training arguments with ``dataclasses.replace``. ``keep_checkpoints`` was once set on the
    instance, not a field, and ``replace`` dropped it: a finetune run given ``--keep_checkpoints true`` then deleted
    its checkpoints. It is a field of every command's training arguments now."""
    import dataclasses

    from compact_bert.cli.finetune_command import parse_finetune_arguments
    from compact_bert.distillation.embedding_config import EmbeddingDistillationConfig
    from compact_bert.distillation.minimoe_config import MiniMoEDistillationConfig
    from compact_bert.distillation.mobilebert_config import MobileBertDistillationConfig
    from compact_bert.distillation.tcd_config import TransferCapabilityDistillationConfig
    from compact_bert.training.training_arguments import CompactBertTrainingArguments

    arguments = ["--model_name_or_path", "minimoe-4l-192h", "--train_file", "train.tsv", "--output_dir", str(tmp_path)]
    _, _, training_args = parse_finetune_arguments([*arguments, "--keep_checkpoints", "true"])
    assert training_args.keep_checkpoints is True
    replaced = dataclasses.replace(training_args, learning_rate=1e-3, output_dir=str(tmp_path / "grid"))
    assert replaced.keep_checkpoints is True and replaced.learning_rate == 1e-3
    for config_class in (
        type(training_args),
        EmbeddingDistillationConfig,
        MiniMoEDistillationConfig,
        MobileBertDistillationConfig,
        TransferCapabilityDistillationConfig,
    ):
        assert issubclass(config_class, CompactBertTrainingArguments), config_class
        assert "keep_checkpoints" in {field.name for field in dataclasses.fields(config_class)}
