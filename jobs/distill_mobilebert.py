"""MobileBERT knowledge transfer (``compact-bert distill mobilebert``): a MobileBERT student learns an IB-BERT teacher's feature maps and attention (eq. 2, 3) and its predictions (eq. 4), by the auxiliary, joint or progressive strategy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import transformers

from ..distillation.data import CorpusArguments, PretrainingCollator, default_tokenizer
from ..distillation.mobilebert_config import MobileBertDistillationConfig
from ..distillation.mobilebert_trainer import MobileBertDistillationTrainer
from ..distillation.trainer_utils import masked_token_accuracy, prepare_block_datasets, preprocess_logits_for_accuracy
from ..training.output_folders import check_run_output
from .model_building import build_from_preset, load_pretrained
from .run_report import train_and_report

__all__ = ["MobileBertStudentArguments", "distill_mobilebert"]


@dataclass
class MobileBertStudentArguments:
    teacher: str = field(
        default=None, metadata={"help": "Folder of the teacher (an IB-BERT pre-training or MLM model)."}
    )
    student_preset: str = field(default="mobilebert", metadata={"help": "Preset of the student."})
    student_overrides: str = field(
        default="{}",
        metadata={"help": "JSON object of student config fields, e.g. to match a small teacher's layers."},
    )
    next_sentence_prediction: bool = field(
        default=True, metadata={"help": "Include NSP in pre-training distillation."}
    )

    def __post_init__(self):
        if not self.teacher:
            raise SystemExit("--teacher is required: the folder of a pre-trained IB-BERT teacher.")


def distill_mobilebert(
    student_args: MobileBertStudentArguments, corpus: CorpusArguments, training_args: MobileBertDistillationConfig
) -> dict:
    """The job (module docstring) on parsed arguments; the run summary."""
    check_run_output(training_args, student_args, corpus)
    teacher = load_pretrained(
        student_args.teacher, (transformers.AutoModelForPreTraining, transformers.AutoModelForMaskedLM), "teacher"
    )
    student = build_from_preset(
        student_args.student_preset,
        student_args.student_overrides,
        "student_overrides",
        transformers.AutoModelForPreTraining,
    )
    tokenizer = default_tokenizer()
    train, held_out = prepare_block_datasets(corpus, tokenizer, student.config, student_args.next_sentence_prediction)
    trainer = MobileBertDistillationTrainer(
        model=student,
        teacher=teacher,
        args=training_args,
        train_dataset=train,
        eval_dataset=held_out,
        processing_class=tokenizer,
        data_collator=PretrainingCollator(tokenizer, corpus.mlm_probability, student_args.next_sentence_prediction),
        compute_metrics=masked_token_accuracy,
        preprocess_logits_for_metrics=preprocess_logits_for_accuracy,
    )
    return train_and_report(
        trainer,
        tokenizer,
        training_args,
        {"strategy": training_args.strategy, "teacher": student_args.teacher, "data": dataclasses.asdict(corpus)},
    )
