"""Shared plumbing of the training commands: their flags parsed into a job's typed arguments, once."""

from __future__ import annotations

import sys

import transformers
from transformers import HfArgumentParser

from ..training.argument_checks import check_finite_numbers, check_training_arguments
from ..training.compat import translate_legacy_training_flags
from ..training.run_errors import RunSettingsError
from ..training.training_arguments import CompactBertTrainingArguments, has_accelerator

__all__ = [
    "as_flags",
    "given_flags",
    "parse_arguments",
]


def parse_arguments(dataclass_types: tuple, argv: list[str], program: str, description: str):
    """Parse ``argv`` into the dataclasses; ``--help`` lists every field with its help text. Flags that only
    one transformers line knows (``--warmup_ratio``, ``--no_cuda``, ...) are translated for the installed one.

    Every random generator is seeded with ``--seed`` right here, before a command builds its models: Trainer
    seeds only when it starts, after the student's random initialization, so two runs with the same seed
    would otherwise start from different weights.

    Without a terminal (output redirected to a file, a CI log) the progress bar is off unless ``--disable_tqdm``
    is given: each redraw would add a line to the log, and the concise step lines say the same.

    The training arguments are checked here too (``argument_checks``): batch sizes, accumulation, ``max_steps``
    and the output folder fail in seconds, before a model or the data is built. A value the dataclasses refuse
    (their ``__post_init__`` checks, transformers' own) is the user's input: it becomes a ``RunSettingsError``,
    which the command prints without a traceback.

    Every training command's training arguments are a ``CompactBertTrainingArguments`` (``--keep_checkpoints``, which
    ``train_and_report`` applies)."""
    for kind in dataclass_types:
        if issubclass(kind, transformers.TrainingArguments) and not issubclass(kind, CompactBertTrainingArguments):
            raise TypeError(
                f"{kind.__name__} must derive from CompactBertTrainingArguments to be a command's arguments"
            )
    parser = HfArgumentParser(dataclass_types, prog=program, description=description)
    try:
        parsed = parser.parse_args_into_dataclasses(args=translate_legacy_training_flags(argv))
    except ValueError as error:
        raise RunSettingsError(str(error)) from error
    for arguments in parsed:
        check_finite_numbers(arguments)
    for arguments in parsed:
        if isinstance(arguments, transformers.TrainingArguments):
            check_training_arguments(arguments)
            if "--disable_tqdm" not in given_flags(argv) and not sys.stderr.isatty():
                arguments.disable_tqdm = True  # a log file gets the step lines, not a progress bar redrawn per step
            if arguments.dataloader_pin_memory and not has_accelerator(arguments):
                arguments.dataloader_pin_memory = False  # pinned memory only speeds copies to an accelerator
            if arguments.full_determinism:
                transformers.enable_full_determinism(arguments.seed)
            else:
                transformers.set_seed(arguments.seed)
    return tuple(parsed)


def given_flags(argv: list[str]) -> set[str]:
    """The flags named on a command line (``--name value`` or ``--name=value``), to tell a default from a choice."""
    return {token.split("=", 1)[0] for token in argv if token.startswith("--")}


def as_flags(settings: dict) -> tuple[str, ...]:
    """``{"num_train_epochs": 3.0, "group_by_length": True}`` as ``--num_train_epochs 3 --group_by_length true``."""
    flags = []
    for name, value in settings.items():
        if isinstance(value, bool):
            text = str(value).lower()
        else:
            text = f"{value:g}" if isinstance(value, float) else str(value)
        flags += [f"--{name}", text]
    return tuple(flags)
