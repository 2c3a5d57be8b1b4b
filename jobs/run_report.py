"""A training run's report: the command line that started it, its summary (``run_summary.json``) and model card, and
the one function that trains, saves, evaluates and reports a run — shared by every job (``compact_bert.jobs``) and
command.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from pathlib import Path

import transformers

from ..model_cards import write_model_card
from ..training.atomic_files import write_text_atomically
from ..training.checkpoints import (
    CheckpointManifestCallback,
    completes_final_save,
    resolve_resume_checkpoint,
    run_identity,
)
from ..training.compat import save_tokenizer
from ..training.console_log import concise_line, verbose
from ..training.run_folder import owned_output_folder, remove_finished_checkpoints

__all__ = ["invoked_command_line", "record_invocation", "summary_line", "train_and_report", "write_summary_and_card"]

# Trainer.save_model pickles the TrainingArguments next to the weights; it stays in checkpoints (Trainer's own
# files) but not in the model folder a user loads or shares.
TRAINING_ARGS_FILE = "training_args.bin"
_EVAL_TIMINGS = {"eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_model_preparation_time"}


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
