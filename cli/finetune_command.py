"""``compact-bert finetune``: the fine-tuning job (``compact_bert.jobs.finetune``) from the command line.

The flags are parsed once into the job's typed arguments (with ``--teacher``, the task-distillation recipe's training
settings are the defaults, ``finetuning/task_recipe.py``); the flags the user named travel with them, so that the job
tells a default from a choice.
"""

from __future__ import annotations

from ..distillation.data import PACKAGED_TEACHER, packaged_teacher_dir
from ..finetuning.data import FinetuneDataArguments
from ..finetuning.finetune_config import FinetuneConfig
from ..finetuning.task_recipe import TRAINING_SETTINGS
from ..jobs.finetune import FinetuneModelArguments, finetune
from ..training.argument_checks import check_output_dir_creatable
from .training_common import as_flags, given_flags, parse_arguments

__all__ = ["DESCRIPTION", "finetune_from_flags", "parse_finetune_arguments", "run"]

DESCRIPTION = (
    "Fine-tune and evaluate a compact-bert folder or preset, or any BERT-like transformers folder, on GLUE-style "
    "classification / regression or CoNLL-style NER. Defaults follow papers 002 (Table 8) and 003 (appendix B). "
    "Every TrainingArguments flag is accepted."
)


def run(argv: list[str]) -> int:
    finetune_from_flags(argv)
    return 0


def finetune_from_flags(argv: list[str]) -> list[dict]:
    """``compact-bert finetune ARGV`` as a function: its flags parsed once, the job run; each run's summary."""
    return finetune(*parse_finetune_arguments(argv), frozenset(given_flags(argv)))


# A recipe setting and the flags that set it on either transformers line (``compat.translate_legacy_training_flags``).
_SETTING_FLAGS = {"group_by_length": ("--group_by_length", "--train_sampling_strategy")}


def _recipe_flags(argv: list[str]) -> list[str]:
    """With ``--teacher``: the task-distillation recipe's training settings (``task_recipe.TRAINING_SETTINGS``) that
    no flag of ``argv`` sets, as flags that ``argv``'s own come after."""
    given = given_flags(argv)
    if "--teacher" not in given:
        return []
    missing = {
        name: value
        for name, value in TRAINING_SETTINGS.items()
        if not given.intersection(_SETTING_FLAGS.get(name, (f"--{name}",)))
    }
    return list(as_flags(missing))


def parse_finetune_arguments(argv: list[str]) -> tuple[FinetuneModelArguments, FinetuneDataArguments, FinetuneConfig]:
    """``argv`` parsed once; with ``--teacher`` the recipe's training settings are the defaults (``_recipe_flags``)."""
    argv = [*_recipe_flags(argv), *argv]
    model_args, data_args, training_args = parse_arguments(
        (FinetuneModelArguments, FinetuneDataArguments, FinetuneConfig), argv, "compact-bert finetune", DESCRIPTION
    )
    if model_args.model_name_or_path == PACKAGED_TEACHER:  # the packaged all-MiniLM-L6-v2, by its short name
        model_args.model_name_or_path = str(packaged_teacher_dir())
    if training_args.teacher_cache_dir is not None:  # before the teacher's logits are computed, not after
        check_output_dir_creatable(training_args.teacher_cache_dir, "teacher_cache_dir")
    return model_args, data_args, training_args
