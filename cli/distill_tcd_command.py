"""``compact-bert distill tcd``: ``compact_bert.jobs.distill_tcd`` from the command line, its flags parsed once."""

from __future__ import annotations

from ..distillation.data import CorpusArguments
from ..distillation.tcd_config import TransferCapabilityDistillationConfig
from ..jobs.distill_tcd import TransferCapabilityStudentArguments, distill_tcd
from .training_common import parse_arguments

__all__ = ["run"]

DESCRIPTION = (
    "Pre-train a MoE-BERT student with MLM + load balancing + transfer-capability distillation from a vanilla "
    "BERT teacher (trunk, residual-inner and query-key cosine relations; paper 003 eq. 13). The teacher is a "
    "dense moe_bert preset pre-trained with `compact-bert pretrain`, or any BERT-like encoder with the same "
    "number of layers (else --layer_map). Every TrainingArguments flag is accepted."
)


def run(argv: list[str]) -> int:
    distill_tcd(
        *parse_arguments(
            (TransferCapabilityStudentArguments, CorpusArguments, TransferCapabilityDistillationConfig),
            argv,
            "compact-bert distill tcd",
            DESCRIPTION,
        )
    )
    return 0
