"""The training settings of the main job's task stage, and the fine-tuning arguments each of its runs gets.

The main job (``jobs.distill_task``) and the labels-only fine-tuning after relation distillation
(``jobs.distill_minimoe``) fine-tune with the task-distillation recipe (``finetuning/task_recipe.py``): its epochs,
batch and length-grouped batches, evaluated once at the end. ``TaskTrainingSettings`` holds what a user may change
about them; ``finetune_config`` turns them into one run's ``FinetuneConfig`` directly, as typed values (no command
line is built and parsed again).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..finetuning.bundled_data import bundled_sst2_files
from ..finetuning.data import FinetuneDataArguments
from ..finetuning.finetune_config import FinetuneConfig
from ..finetuning.task_recipe import (
    LEARNING_RATE,
    NARROWED_STUDENT_EPOCHS,
    TRAINING_SETTINGS,
    UNLABELED_STUDENT_EPOCHS,
    narrowed_student_epochs,
)
from ..training.argument_checks import check_finite_numbers, check_training_arguments
from ..training.compat import training_keywords
from ..training.training_arguments import has_accelerator

__all__ = ["TEACHER_LEARNING_RATE", "TaskTrainingSettings", "finetune_config", "sst2_data"]

# The learning rate of the models the job fine-tunes on the labels (the teacher and the baseline): half the student's
# (finetuning/task_recipe.py).
TEACHER_LEARNING_RATE = 1e-4
# The main job's task: SST-2 at 64 tokens.
TASK_NAME = "sst2"
MAX_SEQ_LENGTH = 64


@dataclass
class TaskTrainingSettings:
    """How each model of the task stage trains: the recipe's settings unless changed here, and the run settings
    every model of the job shares (seed, device, progress bars, data workers, checkpoints, logging, whether output
    folders holding a model or a run may be written over)."""

    num_train_epochs: float | None = field(
        default=None,
        metadata={
            "help": f"Epochs of every model of the task stage (default: the recipe's, "
            f"{TRAINING_SETTINGS['num_train_epochs']:g}; {NARROWED_STUDENT_EPOCHS:g} for a narrowed tiny student "
            f"that --max_latency_ratio chose and the baseline of its shape, {UNLABELED_STUDENT_EPOCHS:g} where that "
            "student learns from unlabeled text)."
        },
    )
    learning_rate: float = field(
        default=LEARNING_RATE, metadata={"help": "Peak learning rate of the student (the recipe's)."}
    )
    labels_learning_rate: float = field(
        default=TEACHER_LEARNING_RATE,
        metadata={
            "help": "Peak learning rate of the models fine-tuned on the labels alone (the teacher, the baseline)."
        },
    )
    per_device_train_batch_size: int = field(
        default=TRAINING_SETTINGS["per_device_train_batch_size"], metadata={"help": "Training examples per step."}
    )
    max_steps: int = field(default=-1, metadata={"help": "Stop each run after this many steps (-1: the epochs)."})
    max_seq_length: int = field(default=MAX_SEQ_LENGTH, metadata={"help": "Tokens per sentence (longer are cut)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Train on the first N examples only."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Score on the first N dev examples only."})
    logging_steps: int = field(default=50, metadata={"help": "Log the loss terms every N steps."})
    seed: int = field(default=42, metadata={"help": "Seed of every model's initialization and data order."})
    use_cpu: bool = field(default=False, metadata={"help": "Train on the CPU even where an accelerator is."})
    disable_tqdm: bool | None = field(
        default=None, metadata={"help": "No progress bars (default: none without a terminal)."}
    )
    dataloader_num_workers: int = field(default=0, metadata={"help": "Data-loading worker processes."})
    keep_checkpoints: bool = field(
        default=False, metadata={"help": "Keep each run's checkpoints once it has finished (default: remove them)."}
    )
    report_to: list[str] = field(
        default_factory=lambda: ["none"], metadata={"help": "Logging integrations (tensorboard, wandb, ...)."}
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Write into output folders that already hold a model or a run (e.g. an earlier run of this "
            "command into the same --output_dir) or that are, or lie inside, an input (the teacher, the data); "
            "without it such a run is refused before anything trains."
        },
    )

    def __post_init__(self):
        check_finite_numbers(self)
        for name in ("num_train_epochs", "learning_rate", "labels_learning_rate", "per_device_train_batch_size"):
            if name == "num_train_epochs" and self.num_train_epochs is None:
                continue
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name} must be > 0, got {getattr(self, name)}.")
        for name in ("max_seq_length", "max_train_samples", "max_eval_samples", "logging_steps"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name} must be >= 1, got {value}.")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"--max_steps must be >= 1, or -1 for the epochs; got {self.max_steps}.")


def finetune_config(
    settings: TaskTrainingSettings,
    output_dir: str,
    learning_rate: float,
    narrowed: bool = False,
    unlabeled: bool = False,
    **extra,
) -> FinetuneConfig:
    """One run's fine-tuning arguments: the recipe's training settings with ``settings``' values, at
    ``learning_rate``, into ``output_dir``; a ``narrowed`` tiny student's epochs unless ``settings`` sets them (with
    ``unlabeled``, those of one that learns from text without labels, and of its baseline); ``extra``: further
    ``FinetuneConfig`` fields (the student's copies and unlabeled file)."""
    recipe_epochs = narrowed_student_epochs(unlabeled) if narrowed else TRAINING_SETTINGS["num_train_epochs"]
    values = {
        **TRAINING_SETTINGS,
        "output_dir": output_dir,
        "learning_rate": learning_rate,
        "num_train_epochs": recipe_epochs if settings.num_train_epochs is None else settings.num_train_epochs,
        "per_device_train_batch_size": settings.per_device_train_batch_size,
        "max_steps": settings.max_steps,
        "logging_strategy": "steps",
        "logging_steps": settings.logging_steps,
        "seed": settings.seed,
        "use_cpu": settings.use_cpu,
        "disable_tqdm": not sys.stderr.isatty() if settings.disable_tqdm is None else settings.disable_tqdm,
        "dataloader_num_workers": settings.dataloader_num_workers,
        "keep_checkpoints": settings.keep_checkpoints,
        "overwrite_output_dir": settings.overwrite_output_dir,
        "report_to": [target for target in settings.report_to if target != "none"] or ["none"],
        **extra,
    }
    config = FinetuneConfig(**training_keywords(values))
    check_training_arguments(config)
    if config.dataloader_pin_memory and not has_accelerator(config):
        config.dataloader_pin_memory = False
    return config


def sst2_data(settings: TaskTrainingSettings, train_file: str | None, validation_file: str | None):
    """The job's SST-2 data arguments: the given files, else the bundled slice and the GLUE dev set."""
    files = bundled_sst2_files()
    return FinetuneDataArguments(
        task_name=TASK_NAME,
        train_file=str(train_file or files["train"]),
        validation_file=str(validation_file or files["validation"]),
        max_seq_length=settings.max_seq_length,
        max_train_samples=settings.max_train_samples,
        max_eval_samples=settings.max_eval_samples,
    )
