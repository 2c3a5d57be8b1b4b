"""One real run of relation distillation (``distill minimoe``) shared by the card and push tests: distill a
tiny MiniMoE (2 steps, a checkpoint per step, TensorBoard logs), then fine-tune it on 48 SST-2 sentences. Its
folders hold what a user's run holds."""

from __future__ import annotations

import json

import pytest

from tests.distillation.cli_helpers import QUICK_DATA, QUIET, run_in_this_process

TINY_MINIMOE = json.dumps(
    {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "max_position_embeddings": 64,
        "num_experts": 4,
    }
)
FINETUNE_SETTINGS = json.dumps(
    {"max_train_samples": 48, "max_eval_samples": 40, "per_device_train_batch_size": 16, "num_train_epochs": 1}
)


@pytest.fixture(scope="session")
def main_job_run(tmp_path_factory):
    """``(student folder, fine-tuned folder)`` of one ``compact-bert distill minimoe`` run."""
    student = tmp_path_factory.mktemp("main_job") / "student"
    quiet = [flag for flag in QUIET if flag not in ("--report_to", "none")]
    run_in_this_process(
        [
            "distill",
            "minimoe",
            "--student_overrides",
            TINY_MINIMOE,
            "--output_dir",
            str(student),
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "8",
            "--logging_steps",
            "1",
            "--save_steps",
            "1",
            "--report_to",
            "tensorboard",
            "--finetune",
            "true",
            "--finetune_settings",
            FINETUNE_SETTINGS,
            "--keep_checkpoints",
            "true",  # kept, so that push's allow-list is tested against real checkpoints
            *QUICK_DATA,
            *quiet,
        ]
    )
    return student, student.parent / "student-sst2"
