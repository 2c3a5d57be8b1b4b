"""``compact-bert distill minimoe``: relation distillation (``compact_bert.jobs.distill_minimoe``) from the command
line — its flags parsed once into the job's arguments (every TrainingArguments flag is the distillation's)."""

from __future__ import annotations

from ..distillation.data import PACKAGED_TEACHER, CorpusArguments
from ..distillation.minimoe_config import MiniMoEDistillationConfig
from ..distillation.relation_kernels import check_relation_kernel_environment
from ..jobs.distill_minimoe import LabelsStepArguments, MiniMoEStudentArguments, distill_minimoe
from .training_common import parse_arguments

__all__ = ["run"]

DESCRIPTION = (
    "Distill a MiniMoE student (mixture of minimal top-1 experts) from a BERT-like teacher with MiniLMv2 "
    f"self-attention relation distillation (paper 002). Defaults: teacher {PACKAGED_TEACHER} (packaged, offline), "
    "student preset minimoe-4l-192h, the bundled WikiText-2 slice. Optionally through a teacher assistant "
    "(teacher -> TA -> student). Then the student is fine-tuned on the bundled SST-2 slice and its SST-2 dev "
    "accuracy reported (--finetune false to skip). Every TrainingArguments flag is accepted (for distillation). "
    "The main job (task distillation from a fine-tuned teacher, compared with the teacher and the layer-dropped "
    "baseline) is `compact-bert distill task`."
)


def run(argv: list[str]) -> int:
    try:  # the environment first: parsing makes the output folder
        check_relation_kernel_environment()
    except ValueError as error:
        raise SystemExit(str(error)) from None
    student, labels, corpus, training = parse_arguments(
        (MiniMoEStudentArguments, LabelsStepArguments, CorpusArguments, MiniMoEDistillationConfig),
        argv,
        "compact-bert distill minimoe",
        DESCRIPTION,
    )
    distill_minimoe(student, corpus, training, labels)
    return 0
