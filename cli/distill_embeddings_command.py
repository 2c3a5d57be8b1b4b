"""``compact-bert distill embeddings``: embedding distillation (``compact_bert.jobs.distill_embeddings``) from the
command line — its flags parsed once into the job's arguments."""

from __future__ import annotations

from ..distillation.data import PACKAGED_TEACHER
from ..distillation.embedding_config import EmbeddingDistillationConfig
from ..distillation.relation_kernels import check_relation_kernel_environment
from ..jobs.distill_embeddings import EmbeddingStudentArguments, distill_embeddings
from .training_common import parse_arguments

__all__ = ["run"]

DESCRIPTION = (
    "Distill a compact or MoE sentence-embedding student from a sentence-transformers teacher: MSE between the "
    f"student's and the teacher's pooled, normalised embeddings. Defaults: teacher {PACKAGED_TEACHER} (packaged), "
    "student minilm-3l-384h-ffn1024 started from the teacher's layers, the bundled sentences; the STS Benchmark dev "
    "Spearman of student and teacher at the end. Every TrainingArguments flag is accepted."
)


def run(argv: list[str]) -> int:
    try:  # the environment first: parsing makes the output folder
        check_relation_kernel_environment()
    except ValueError as error:
        raise SystemExit(str(error)) from None
    arguments = parse_arguments(
        (EmbeddingStudentArguments, EmbeddingDistillationConfig), argv, "compact-bert distill embeddings", DESCRIPTION
    )
    distill_embeddings(*arguments)
    return 0
