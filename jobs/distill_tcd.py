"""Transfer-capability distillation (paper 003, ``compact-bert distill tcd``): pre-train a MoE-BERT student with MLM, load balancing and the distillation of its teacher's relations."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import transformers

from ..configuration import MoEBertConfig
from ..distillation.data import CorpusArguments, PretrainingCollator, default_tokenizer
from ..distillation.tcd_config import TransferCapabilityDistillationConfig
from ..distillation.tcd_trainer import TransferCapabilityDistillationTrainer
from ..distillation.teacher_init_runner import start_from_teacher
from ..distillation.teachers import load_encoder
from ..distillation.trainer_utils import masked_token_accuracy, prepare_block_datasets, preprocess_logits_for_accuracy
from ..training.output_folders import check_run_output
from .model_building import build_from_preset
from .run_report import train_and_report

__all__ = ["TransferCapabilityStudentArguments", "distill_tcd"]


@dataclass
class TransferCapabilityStudentArguments:
    teacher: str = field(default=None, metadata={"help": "Folder of the vanilla (dense) BERT teacher."})
    student_preset: str = field(default="moe-bert-small", metadata={"help": "MoE-BERT student preset."})
    student_overrides: str = field(default="{}", metadata={"help": "JSON object of student config fields."})
    init_from_teacher: str = field(
        default="auto",
        metadata={
            "help": "'auto' (default): start the student from its teacher wherever the shapes allow (layers of "
            "--layer_map or evenly spaced, importance-ranked width, upcycled or split experts; "
            "distillation/teacher_init.py); 'none': random initialization."
        },
    )

    def __post_init__(self):
        if not self.teacher:
            raise SystemExit("--teacher is required: the folder of a pre-trained vanilla BERT teacher.")


def distill_tcd(
    student_args: TransferCapabilityStudentArguments,
    corpus: CorpusArguments,
    training_args: TransferCapabilityDistillationConfig,
) -> dict:
    """The job (module docstring) on parsed arguments; the run summary."""
    check_run_output(training_args, student_args, corpus)
    print(f"distill tcd: loading the teacher {student_args.teacher} ...", flush=True)
    try:
        teacher = load_encoder(student_args.teacher)
    except (ValueError, OSError) as error:
        raise SystemExit(f"--teacher: {error}") from None
    student = build_from_preset(
        student_args.student_preset,
        student_args.student_overrides,
        "student_overrides",
        transformers.AutoModelForMaskedLM,
    )
    if not isinstance(student.config, MoEBertConfig):
        raise SystemExit(f"--student_preset {student_args.student_preset!r} is not a MoE-BERT preset.")
    tokenizer = default_tokenizer()
    print("distill tcd: tokenizing the corpus into blocks ...", flush=True)
    train, held_out = prepare_block_datasets(corpus, tokenizer, student.config, with_pairs=False)
    initialization = start_from_teacher(
        student,
        teacher,
        student_args.teacher,
        student_args.init_from_teacher,
        training_args.parsed_layer_map,
        train,
        tokenizer,
        training_args.seed,
    )
    try:
        trainer = TransferCapabilityDistillationTrainer(
            model=student,
            teacher=teacher,
            args=training_args,
            train_dataset=train,
            eval_dataset=held_out,
            data_collator=PretrainingCollator(tokenizer, corpus.mlm_probability),
            processing_class=tokenizer,
            compute_metrics=masked_token_accuracy,
            preprocess_logits_for_metrics=preprocess_logits_for_accuracy,
        )
    except ValueError as error:
        raise SystemExit(f"distill tcd: {error}") from None
    return train_and_report(
        trainer,
        tokenizer,
        training_args,
        {
            "teacher": student_args.teacher,
            "data": dataclasses.asdict(corpus),
            **({"teacher_initialization": initialization} if initialization else {}),
        },
    )
