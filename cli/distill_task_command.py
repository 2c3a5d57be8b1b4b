"""``compact-bert distill task``: the main job — task distillation of a small student from a fine-tuned teacher.

With no arguments, offline, on 2 CPU cores in under 10 minutes: the packaged all-MiniLM-L6-v2 is fine-tuned on the
bundled SST-2 slice (the teacher); a student (by default the 3-layer MiniLM: docs/students.md says why this shape)
starts from the fine-tuned teacher's layers and learns the teacher's predictions on the slice and on perturbed
copies of it (``compact-bert finetune --teacher``); the teacher with every other layer dropped is fine-tuned on the
labels as the baseline to beat. All three are scored on the full GLUE SST-2 dev set and timed side by side; the
student is exported to ONNX and int8, scored again, and gets its card. Folders: ``<output_dir>`` (the run summary),
``<output_dir>-teacher-sst2``, ``<output_dir>-baseline-sst2`` and ``<output_dir>-sst2`` (the student classifier).
The student is taught with the task-distillation recipe of ``finetuning/task_recipe.py``. ``--max_latency_ratio R``
replaces the preset's depth by the deepest within R× the teacher's latency on this machine, measured before training
(``finetuning/depth_budget.py``). The baseline always has the student's depth (the teacher's layers evenly spaced,
ending at its last: every other layer for the default 3-layer student), so the two are compared at equal latency.

Only the task stage runs here: no general distillation on a corpus (the relation distillation of paper 002 is
``compact-bert distill minimoe``). Training flags other than those every run of the job shares (seed, device,
progress bars, data workers, checkpoints, logging integrations) are refused: the fine-tuning settings of the three
models go in ``--finetune_args``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..distillation.data import PACKAGED_TEACHER
from ..finetuning.depth_budget import check_max_latency_ratio
from ..training.run_errors import RunSettingsError
from ..training.training_arguments import CompactBertTrainingArguments
from .distill_minimoe_command import (
    StudentArguments,
    TaskStageArguments,
    main_job,
    parse_finetune_step,
    ship_and_report,
)
from .main_job_comparison import INHERITED_TRAINING_FLAGS
from .training_common import parse_arguments

__all__ = ["DEFAULT_STUDENT_PRESET", "TaskJobTrainingArguments", "TaskStudentArguments", "run"]

# The main job's student, chosen by accuracy at <= 1.1x the dense student's latency (docs/students.md).
DEFAULT_STUDENT_PRESET = "minilm-3l-384h"

DESCRIPTION = (
    "The main job: fine-tune a teacher on SST-2, teach a small student that starts from its layers the teacher's "
    "predictions, fine-tune the layer-dropped teacher as the baseline, then score, time, export and card all of it. "
    f"Defaults: teacher {PACKAGED_TEACHER} (packaged, offline), student preset {DEFAULT_STUDENT_PRESET}, the bundled "
    "SST-2 slice, the GLUE SST-2 dev set."
)


@dataclass
class TaskStudentArguments(StudentArguments):
    student_preset: str = field(
        default=DEFAULT_STUDENT_PRESET,
        metadata={
            "help": "Student preset (see `compact-bert presets`; a MiniLM or MiniMoE preset). The default, the "
            "3-layer MiniLM, is the most accurate student at <= 1.1x its own latency in eager PyTorch and ONNX "
            "Runtime on this CPU (docs/students.md)."
        },
    )
    max_latency_ratio: float | None = field(
        default=None,
        metadata={
            "help": "Instead of the preset's depth: the deepest student whose latency is at most this share of the "
            "teacher's, measured on this machine before training (batch 1 x 128, the same inference path; "
            "finetuning/depth_budget.py), e.g. 0.5. The baseline gets the same depth."
        },
    )

    def __post_init__(self):
        if self.max_latency_ratio is not None:
            check_max_latency_ratio(self.max_latency_ratio)


@dataclass
class TaskJobTrainingArguments(CompactBertTrainingArguments):
    """The training flags the job's runs share; ``output_dir`` names the job's folders."""

    output_dir: str | None = field(
        default="outputs/task-student",
        metadata={"help": "The run summary's folder; the models go to <output_dir>-{teacher,baseline}-sst2, -sst2."},
    )


# Flags of TaskJobTrainingArguments that mean something here.
_JOB_TRAINING_FLAGS = {"output_dir", "report_to", *INHERITED_TRAINING_FLAGS}


def _refuse_unused_training_flags(argv: list[str]) -> None:
    """A TrainingArguments flag the job would not use is an error, not a silent no-op (module docstring)."""
    own = {item.name for kind in (TaskStudentArguments, TaskStageArguments) for item in fields(kind)}
    training = {item.name for item in fields(TaskJobTrainingArguments)}
    for argument in argv:
        if not argument.startswith("--"):
            continue
        name = argument[2:].split("=", 1)[0]
        if name in training and name not in _JOB_TRAINING_FLAGS and name not in own:
            raise RunSettingsError(
                f"--{name} is not a flag of `compact-bert distill task`: the job's own training flags are "
                f"{', '.join('--' + flag for flag in sorted(_JOB_TRAINING_FLAGS))}; fine-tuning settings of the "
                f"teacher, baseline and student go in --finetune_args, e.g. --finetune_args '--{name} VALUE'."
            )


def run(argv: list[str]) -> int:
    _refuse_unused_training_flags(argv)
    student_args, task_args, training_args = parse_arguments(
        (TaskStudentArguments, TaskStageArguments, TaskJobTrainingArguments),
        argv,
        "compact-bert distill task",
        DESCRIPTION,
    )
    parse_finetune_step(training_args.output_dir, task_args, training_args)
    summary = main_job(student_args, task_args, training_args)
    ship_and_report(summary, task_args, training_args)
    return 0
