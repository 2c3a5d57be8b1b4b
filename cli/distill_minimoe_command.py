"""``compact-bert distill minimoe``: MiniLMv2 relation distillation into a MiniMoE student — the main job.

With no arguments it distills a MiniMoE 4L;192H student (4 experts) from the packaged all-MiniLM-L6-v2 on
the bundled WikiText-2 slice in a few minutes on 2 CPU cores, and saves a Hub-ready folder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import transformers

from ..configuration import MiniMoEConfig
from ..distillation.compat import FROM_PRETRAINED_KWARGS
from ..distillation.data import (
    PACKAGED_TEACHER,
    CorpusArguments,
    PretrainingCollator,
    check_model_compatibility,
    default_tokenizer,
)
from ..distillation.minimoe_config import MiniMoEDistillationConfig
from ..distillation.minimoe_trainer import MiniMoEDistillationTrainer
from ..distillation.teachers import load_encoder
from ..distillation.trainer_utils import prepare_block_datasets
from ..modeling.model_stats import count_parameters
from .training_common import build_from_preset, parse_arguments, train_and_report

__all__ = ["MiniMoEStudentArguments", "run"]

DESCRIPTION = (
    "Distill a MiniMoE student (mixture of minimal top-1 experts) from a BERT-like teacher with MiniLMv2 "
    f"self-attention relation distillation (paper 002). Defaults: teacher {PACKAGED_TEACHER} (packaged, offline), "
    "student preset minimoe-4l-192h, the bundled WikiText-2 slice. Optionally through a teacher assistant "
    "(teacher -> TA -> student). Every TrainingArguments flag is accepted."
)


@dataclass
class MiniMoEStudentArguments:
    teacher: str = field(
        default=PACKAGED_TEACHER, metadata={"help": f"Teacher folder, or '{PACKAGED_TEACHER}' for the packaged one."}
    )
    student_preset: str = field(default="minimoe-4l-192h", metadata={"help": "Student preset (see `compact-bert presets`)."})
    student_overrides: str = field(
        default="{}", metadata={"help": "JSON object of student config fields, e.g. '{\"num_experts\": 8, \"capacity_factor\": 2.0}'."}
    )
    teacher_assistant_preset: str | None = field(
        default=None, metadata={"help": "Distill this preset from the teacher first, then the student from it."}
    )
    teacher_assistant_overrides: str = field(default="{}", metadata={"help": "JSON config fields of the assistant."})
    teacher_assistant_max_steps: int | None = field(
        default=None, metadata={"help": "Optimizer steps of the assistant (default: --max_steps)."}
    )


def _distill(teacher, student, training_args, datasets, collator, tokenizer, extra: dict) -> dict:
    train, held_out = datasets
    trainer = MiniMoEDistillationTrainer(
        model=student, teacher=teacher, args=training_args, train_dataset=train, eval_dataset=held_out,
        data_collator=collator, processing_class=tokenizer,
    )  # fmt: skip
    total, active = count_parameters(student)
    return train_and_report(trainer, tokenizer, training_args, {
        **extra, "student_total_params": total, "student_active_params_per_token": active,
        "load_with": f"transformers.AutoModel.from_pretrained({str(Path(training_args.output_dir).resolve())!r})",
    })  # fmt: skip


def run(argv: list[str]) -> int:
    student_args, corpus, training_args = parse_arguments(
        (MiniMoEStudentArguments, CorpusArguments, MiniMoEDistillationConfig), argv, "compact-bert distill minimoe",
        DESCRIPTION,
    )  # fmt: skip
    try:
        teacher = load_encoder(student_args.teacher)
    except (ValueError, OSError) as error:
        raise SystemExit(f"--teacher: {error}") from None
    tokenizer = default_tokenizer()
    student = build_from_preset(student_args.student_preset, student_args.student_overrides, "student_overrides",
                                transformers.AutoModel)  # fmt: skip
    if not isinstance(student.config, MiniMoEConfig):
        raise SystemExit(f"--student_preset {student_args.student_preset!r} is not a MiniMoE/MiniLM preset.")
    # Tokenized once for the whole chain (assistant and student read the same blocks).
    datasets = prepare_block_datasets(corpus, tokenizer, student.config, with_pairs=False)
    collator = PretrainingCollator(tokenizer, corpus.mlm_probability)
    if student_args.teacher_assistant_preset:
        assistant_dir = Path(training_args.output_dir) / "teacher_assistant"
        if not (assistant_dir / "run_summary.json").is_file():
            assistant = build_from_preset(student_args.teacher_assistant_preset, student_args.teacher_assistant_overrides,
                                          "teacher_assistant_overrides", transformers.AutoModel)  # fmt: skip
            check_model_compatibility(assistant.config, tokenizer, corpus.block_size)
            assistant_args = dataclasses.replace(
                training_args, output_dir=str(assistant_dir),
                max_steps=student_args.teacher_assistant_max_steps or training_args.max_steps,
            )  # fmt: skip
            _distill(teacher, assistant, assistant_args, datasets, collator, tokenizer, {"role": "teacher_assistant"})
        teacher = transformers.AutoModel.from_pretrained(assistant_dir, **FROM_PRETRAINED_KWARGS)
    _distill(teacher, student, training_args, datasets, collator, tokenizer, {
        "role": "student", "teacher": student_args.teacher,
        "teacher_assistant": student_args.teacher_assistant_preset,
    })  # fmt: skip
    return 0
