"""``compact-bert pretrain``: ``compact_bert.jobs.pretrain`` from the command line, its flags parsed once."""

from __future__ import annotations

from ..distillation.data import CorpusArguments
from ..jobs.pretrain import PretrainingModelArguments, pretrain
from ..training.training_arguments import CompactBertTrainingArguments
from .training_common import parse_arguments

__all__ = ["run"]

DESCRIPTION = (
    "Pre-train a compact-bert model with masked language modeling (and next-sentence prediction for the "
    "MobileBERT/IB-BERT family) through transformers' Trainer. No IB-BERT weights exist anywhere, so this is "
    "how a MobileBERT teacher is made. Every TrainingArguments flag is accepted; --fp16 is refused for NoNorm "
    "models (activations reach ~1e7, beyond float16's range): use --bf16. A run whose loss turns non-finite or "
    "grows 100-fold stops with exit status 1 before saving the diverged state."
)


def run(argv: list[str]) -> int:
    pretrain(
        *parse_arguments(
            (PretrainingModelArguments, CorpusArguments, CompactBertTrainingArguments),
            argv,
            "compact-bert pretrain",
            DESCRIPTION,
        )
    )
    return 0
