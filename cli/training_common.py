"""Shared plumbing of the training commands: argument parsing, model building, run-and-report."""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from pathlib import Path

import torch
import transformers
from transformers import HfArgumentParser

from ..configuration import PRESETS, preset_config
from ..model_cards import write_model_card
from ..training.atomic_files import write_text_atomically
from ..training.checked_loading import load_checked
from ..training.checkpoints import (
    CheckpointManifestCallback,
    completes_final_save,
    resolve_resume_checkpoint,
    run_identity,
)
from ..training.compat import FROM_PRETRAINED_KWARGS, save_tokenizer, translate_legacy_training_flags
from ..training.console_log import concise_line, verbose
from ..training.run_errors import RunSettingsError
from ..training.run_folder import owned_output_folder, remove_finished_checkpoints
from ..training.training_arguments import CompactBertTrainingArguments
from .argument_checks import check_training_arguments

__all__ = [
    "as_flags",
    "build_from_preset",
    "given_flags",
    "invoked_command_line",
    "load_pretrained",
    "parse_arguments",
    "parse_json_object",
    "record_invocation",
    "train_and_report",
    "write_summary_and_card",
]

# Trainer.save_model pickles the TrainingArguments next to the weights; it stays in checkpoints (Trainer's own
# files) but not in the model folder a user loads or shares.
TRAINING_ARGS_FILE = "training_args.bin"


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
        if isinstance(arguments, transformers.TrainingArguments):
            check_training_arguments(arguments)
            if "--disable_tqdm" not in given_flags(argv) and not sys.stderr.isatty():
                arguments.disable_tqdm = True  # a log file gets the step lines, not a progress bar redrawn per step
            if arguments.dataloader_pin_memory and not _has_accelerator(arguments):
                arguments.dataloader_pin_memory = False  # pinned memory only speeds copies to an accelerator
            if arguments.full_determinism:
                transformers.enable_full_determinism(arguments.seed)
            else:
                transformers.set_seed(arguments.seed)
    return tuple(parsed)


_EVAL_TIMINGS = {"eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_model_preparation_time"}


def _has_accelerator(arguments) -> bool:
    """Whether a run will train on an accelerator: without one, PyTorch warns at every data loader that pinned
    memory is useless (four times in the main job) and pins nothing."""
    if arguments.use_cpu:
        return False
    accelerator = getattr(torch, "accelerator", None)
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


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


def parse_json_object(text: str, field: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise SystemExit(f"--{field} must be a JSON object, e.g. '{{\"num_hidden_layers\": 4}}': {error}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"--{field} must be a JSON object, got {text!r}.")
    return value


def build_from_preset(preset: str, overrides_json: str, field: str, auto_class, teacher_config=None):
    """A freshly initialized model of ``preset`` with ``overrides`` applied (a dense one as ``teacher_config``'s
    architecture: ``configuration.dense_students``); bad fields fail here."""
    if preset not in PRESETS:
        raise SystemExit(f"Unknown preset {preset!r}; valid presets: {', '.join(sorted(PRESETS))}.")
    try:
        config = preset_config(preset, teacher_config=teacher_config, **parse_json_object(overrides_json, field))
    except ValueError as error:
        raise SystemExit(f"--{field}: {error}") from None
    return auto_class.from_config(config)


def load_pretrained(path: str, auto_classes: tuple, role: str):
    """The first of ``auto_classes`` that can load ``path`` (e.g. pre-training head, else masked LM)."""
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise SystemExit(f"--{role}: {folder} is not a model folder (no config.json).")
    errors = []
    for auto_class in auto_classes:
        try:
            return load_checked(auto_class, folder, f"--{role}", **FROM_PRETRAINED_KWARGS)
        except (ValueError, KeyError) as error:
            errors.append(f"{auto_class.__name__}: {error}")
    raise SystemExit(f"--{role}: cannot load {folder}: " + " | ".join(errors))


# The arguments ``cli.main.main`` was called with; ``sys.argv[1:]`` when a command runs without it.
_invoked_arguments: list[str] | None = None


def record_invocation(argv: list[str] | None) -> None:
    """Called by ``cli.main.main``: a command run as a function (``main([...])``) has its own arguments, not the
    process's ``sys.argv``; ``None`` when it returns."""
    global _invoked_arguments
    _invoked_arguments = None if argv is None else list(argv)


def invoked_command_line() -> str:
    """The command as the user typed it (``compact-bert ...``), for the model card's recipe. ``sys.argv[1:]`` is
    the same under the console script, ``python -m compact_bert.cli.main`` and ``accelerate launch -m``."""
    arguments = sys.argv[1:] if _invoked_arguments is None else _invoked_arguments
    return shlex.join(["compact-bert", *arguments])


def write_summary_and_card(folder: str | Path, summary: dict) -> None:
    """``run_summary.json``, and the model card rendered from it when ``folder`` holds a model (a PEFT adapter
    folder has no ``config.json`` and keeps the card PEFT writes)."""
    write_text_atomically(Path(folder, "run_summary.json"), json.dumps(summary, indent=2) + "\n")
    if Path(folder, "config.json").is_file():
        write_model_card(folder)


def train_and_report(trainer, tokenizer, training_args, extra_summary: dict | None = None) -> dict:
    """Train (resuming if asked), save model + tokenizer, evaluate, print and return a summary.

    Every checkpoint gets a manifest once complete; ``--resume_from_checkpoint last`` resumes from the newest
    complete one (see ``training/checkpoints.py``), and any checkpoint is refused early, with the reason, when
    it is incomplete, from another method or model shape, or already at ``--max_steps``. The final model folder
    holds no ``training_args.bin`` (Trainer's pickle of the arguments, which nobody needs to load a model), and
    gets its model card (``README.md``) from the summary: the command line is recorded for the card's recipe. Once
    all of that is written, the run's checkpoints are removed unless ``--keep_checkpoints`` (``run_folder``; training
    arguments that are not ``CompactBertTrainingArguments`` keep none)."""
    transformers.utils.logging.set_verbosity(training_args.get_process_log_level())
    logging.basicConfig(stream=sys.stdout, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("compact_bert").setLevel(logging.INFO if training_args.should_log else logging.WARNING)
    start = time.perf_counter()
    identity = run_identity(trainer)
    try:
        resume = resolve_resume_checkpoint(
            training_args.output_dir, training_args.resume_from_checkpoint, identity, training_args.max_steps
        )
    except ValueError as error:
        raise SystemExit(f"--resume_from_checkpoint {training_args.resume_from_checkpoint}: {error}") from None
    manifests = CheckpointManifestCallback(identity)
    trainer.add_callback(manifests)
    with owned_output_folder(training_args.output_dir, resume is not None, training_args.process_index == 0):
        if completes_final_save(resume, training_args.max_steps):
            _load_finished_checkpoint(trainer, resume)
        else:
            try:
                trainer.train(resume_from_checkpoint=resume)
            finally:
                manifests.give_back_rotation(trainer.args)
        trainer.save_model(training_args.output_dir)
    if training_args.should_save:
        Path(training_args.output_dir, TRAINING_ARGS_FILE).unlink(missing_ok=True)
    if trainer.is_world_process_zero():
        save_tokenizer(tokenizer, training_args.output_dir)
    metrics = trainer.evaluate() if trainer.eval_dataset is not None else {}
    summary = {
        "output_dir": str(Path(training_args.output_dir).resolve()),
        "train_seconds": round(time.perf_counter() - start, 1),
        "optimizer_steps": trainer.state.global_step,
        "world_size": training_args.world_size,
        "command_line": invoked_command_line(),
        **{key: round(value, 4) if isinstance(value, float) else value for key, value in metrics.items()},
        **(extra_summary or {}),
    }
    if trainer.is_world_process_zero():
        write_summary_and_card(training_args.output_dir, summary)
        if not getattr(training_args, "keep_checkpoints", False):
            remove_finished_checkpoints(training_args.output_dir)
        print(json.dumps(summary, indent=2) if verbose() else summary_line(summary))
    return summary


def _load_finished_checkpoint(trainer, checkpoint: str) -> None:
    """The model and state of a checkpoint at ``--max_steps`` (a run stopped during its final save): nothing is
    left to train, so Trainer's resume (which would run a step past it) is bypassed and the save is completed."""
    from transformers import TrainerState

    trainer._load_from_checkpoint(checkpoint)
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))


def summary_line(summary: dict) -> str:
    """The end of a run in one line: where it is, how long it took, its evaluation numbers (the routing ones
    summarised over blocks); the whole summary is in the folder's ``run_summary.json`` (``--verbose`` prints it)."""
    evaluation = {
        key: value
        for key, value in summary.items()
        if key.startswith("eval_")
        and key not in _EVAL_TIMINGS
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    }
    finished = (
        f"Finished in {summary['train_seconds']:.0f} s ({summary['optimizer_steps']} steps): {summary['output_dir']}"
    )
    parts = [finished]
    if evaluation:
        parts.append(
            concise_line(evaluation, summary["optimizer_steps"], summary["optimizer_steps"]).split(" | ", 1)[1]
        )
    parts.append(f"summary: {Path(summary['output_dir']) / 'run_summary.json'}")
    return " | ".join(parts)
