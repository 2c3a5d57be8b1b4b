"""``compact-bert distill tcd``: pre-train a MoE-BERT with transfer-capability distillation (paper 003)."""

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
from ..jobs.run_report import train_and_report
from .training_common import build_from_preset, parse_arguments

__all__ = ["TransferCapabilityStudentArguments", "run"]

DESCRIPTION = (
    "Pre-train a MoE-BERT student with MLM + load balancing + transfer-capability distillation from a vanilla "
    "BERT teacher (trunk, residual-inner and query-key cosine relations; paper 003 eq. 13). The teacher is a "
    "dense moe_bert preset pre-trained with `compact-bert pretrain`, or any BERT-like encoder with the same "
    "number of layers (else --layer_map). Every TrainingArguments flag is accepted."
)


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


def run(argv: list[str]) -> int:
    student_args, corpus, training_args = parse_arguments(
        (TransferCapabilityStudentArguments, CorpusArguments, TransferCapabilityDistillationConfig),
        argv,
        "compact-bert distill tcd",
        DESCRIPTION,
    )
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
    train_and_report(
        trainer,
        tokenizer,
        training_args,
        {
            "teacher": student_args.teacher,
            "data": dataclasses.asdict(corpus),
            **({"teacher_initialization": initialization} if initialization else {}),
        },
    )
    return 0
