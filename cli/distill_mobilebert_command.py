"""``compact-bert distill mobilebert``: ``compact_bert.jobs.distill_mobilebert`` from the command line, its flags parsed once."""

from __future__ import annotations

from ..distillation.data import CorpusArguments
from ..distillation.mobilebert_config import MobileBertDistillationConfig
from ..jobs.distill_mobilebert import MobileBertStudentArguments, distill_mobilebert
from .training_common import parse_arguments

__all__ = ["run"]

DESCRIPTION = (
    "Distill a MobileBERT student from a pre-trained IB-BERT teacher (`compact-bert pretrain`) with the "
    "feature-map (eq. 2) and attention (eq. 3) transfer and pre-training distillation (eq. 4) of the MobileBERT "
    "paper, using the auxiliary (akt), joint (jkt) or progressive (pkt) strategy. Every TrainingArguments flag "
    "is accepted; stages are counted in optimizer steps (--max_steps is required). --fp16 is refused for NoNorm "
    "students and teachers (their activations reach ~1e7, beyond float16's range): use --bf16."
)


def run(argv: list[str]) -> int:
    distill_mobilebert(
        *parse_arguments(
            (MobileBertStudentArguments, CorpusArguments, MobileBertDistillationConfig),
            argv,
            "compact-bert distill mobilebert",
            DESCRIPTION,
        )
    )
    return 0
