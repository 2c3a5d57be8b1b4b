"""The main job's fine-tuning settings as ``compact-bert finetune`` flags, for the studies that run the job's roles
as command lines (``task_recipes``, ``student_selection``, ``student_results``): the same values as
``compact_bert.jobs.task_settings`` (the task-distillation recipe, the labels-only learning rate)."""

from __future__ import annotations

import json

from transformers import AutoConfig

from compact_bert.configuration.presets import minilm_fields_like
from compact_bert.finetuning.task_recipe import TRAINING_SETTINGS
from compact_bert.jobs.task_comparison import BASELINE_PRESET
from compact_bert.jobs.task_settings import MAX_SEQ_LENGTH, TASK_NAME, TaskTrainingSettings

__all__ = ["COMPARISON_FLAGS", "COMPARISON_TRAINING_FLAGS", "TASK_FLAGS", "as_flags", "baseline_arguments"]


def as_flags(settings: dict) -> tuple[str, ...]:
    """``{"num_train_epochs": 3.0, "group_by_length": True}`` as ``--num_train_epochs 3 --group_by_length true``."""
    flags = []
    for name, value in settings.items():
        text = str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else value
        flags += [f"--{name}", str(text)]
    return tuple(flags)


_DEFAULTS = TaskTrainingSettings()
TASK_FLAGS = ("--task_name", TASK_NAME, "--max_seq_length", str(MAX_SEQ_LENGTH))
# The labels-only runs of the job (teacher, baseline): the recipe's settings at the labels' learning rate.
COMPARISON_TRAINING_FLAGS = as_flags(
    {
        **TRAINING_SETTINGS,
        "learning_rate": _DEFAULTS.labels_learning_rate,
        "logging_strategy": "steps",
        "logging_steps": _DEFAULTS.logging_steps,
    }
)
COMPARISON_FLAGS = (*TASK_FLAGS, *COMPARISON_TRAINING_FLAGS)


def baseline_arguments(teacher_path: str, output_dir: str, num_hidden_layers: int | None = None) -> list[str]:
    """The model flags of the layer-dropped baseline: the teacher's architecture and width with ``num_hidden_layers``
    (default half, rounded up) of the pretrained teacher's layers, evenly spaced."""
    overrides = json.dumps(minilm_fields_like(AutoConfig.from_pretrained(teacher_path), num_hidden_layers))
    return [
        "--model_name_or_path",
        BASELINE_PRESET,
        "--model_overrides",
        overrides,
        "--init_from_teacher",
        teacher_path,
        "--layer_map",
        "uniform",
        "--output_dir",
        output_dir,
    ]
