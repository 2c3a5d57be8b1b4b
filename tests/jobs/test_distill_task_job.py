"""The main job as a Python call (``compact_bert.jobs.distill_task``) is the command: same settings, same weights and
numbers; the spec refuses bad values by name before anything runs."""

from __future__ import annotations

import hashlib
import json

import pytest

from compact_bert.cli.main import main
from compact_bert.jobs.distill_task import TaskDistillationResult, TaskDistillationSpec, distill_task

TINY_STUDENT = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
QUICK = {"max_train_samples": 32, "max_eval_samples": 32, "per_device_train_batch_size": 16, "num_train_epochs": 1}


def _digest(folder) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_the_python_job_and_the_command_give_the_same_weights_and_numbers(tmp_path):
    result = distill_task(
        TaskDistillationSpec(
            student_overrides=TINY_STUDENT, output_dir=str(tmp_path / "python"), export_onnx=False, **QUICK
        )
    )
    assert isinstance(result, TaskDistillationResult)
    flags = [item for name, value in QUICK.items() for item in (f"--{name}", str(value))]
    overrides = json.dumps(TINY_STUDENT)
    command = ["distill", "task", "--student_overrides", overrides, "--export_onnx", "false", *flags]
    assert main([*command, "--output_dir", str(tmp_path / "command")]) == 0
    summary = json.loads((tmp_path / "command" / "run_summary.json").read_text())
    assert summary["comparison"]["sst2_accuracy"] == result.accuracy
    for role in ("teacher-sst2", "baseline-sst2", "sst2"):
        assert _digest(tmp_path / f"python-{role}") == _digest(tmp_path / f"command-{role}"), role
    assert result.student_dir == (tmp_path / "python-sst2").resolve()
    assert set(result.share_of_teacher_kept) == {"baseline", "student"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"student_preset": "minilm-9l"}, "--student_preset 'minilm-9l' is unknown; valid presets: "),
        ({"student_overrides": "{not json"}, "--student_overrides"),
        ({"num_train_epochs": 0}, "--num_train_epochs must be > 0"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"max_steps": 0}, "--max_steps must be >= 1, or -1"),
        ({"augment_copies": -1}, "--augment_copies must be >= 0"),
        ({"train_file": "/nonexistent/train.tsv"}, "--train_file /nonexistent/train.tsv does not exist"),
    ],
)
def test_the_spec_refuses_a_bad_value_by_name(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        TaskDistillationSpec(**fields)
