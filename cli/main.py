"""compact-bert: compact and mixture-of-experts BERT models and their distillation."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import sys

from ..jobs.run_report import record_invocation
from ..training.console_log import VERBOSE_VARIABLE
from . import benchmark_command, convert_command, evaluate_command, export_command, presets_command, push_command

__all__ = ["DEBUG_VARIABLE", "build_parser", "describe_failure", "interrupted_message", "main", "one_line_message"]

# Set (to anything but "" or "0") to see tracebacks, as --debug does.
DEBUG_VARIABLE = "COMPACT_BERT_DEBUG"

_SIMPLE_COMMANDS = (
    presets_command,
    convert_command,
    export_command,
    push_command,
    benchmark_command,
    evaluate_command,
)
# Training commands parse their own arguments (HfArgumentParser: every TrainingArguments flag).
TRAINING_COMMANDS = {("pretrain",): "pretrain_command", ("finetune",): "finetune_command"}
DISTILLATION_METHODS = {
    "mobilebert": "distill_mobilebert_command",
    "minimoe": "distill_minimoe_command",
    "tcd": "distill_tcd_command",
    "embeddings": "distill_embeddings_command",
    "task": "distill_task_command",
}
TRAINING_COMMANDS.update({("distill", method): module for method, module in DISTILLATION_METHODS.items()})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compact-bert", description=__doc__)
    parser.add_argument("--version", action="version", version=_version_line())
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Show transformers' full log dicts (every routing number of every block) on the console.",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="Show the traceback of a failure instead of its one-line message (before the command: "
        f"`compact-bert --debug export ...`; or set ${DEBUG_VARIABLE}=1).",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _SIMPLE_COMMANDS:
        command.add_parser(subparsers)
    subparsers.add_parser(
        "pretrain", help="Pre-train a preset with MLM (+NSP); see `compact-bert pretrain --help`.", add_help=False
    )
    subparsers.add_parser(
        "finetune",
        help="Fine-tune and evaluate a model folder or preset on classification, regression or NER; see "
        "`compact-bert finetune --help`.",
        add_help=False,
    )
    distill = subparsers.add_parser("distill", help="Distill a student; see `compact-bert distill METHOD --help`.")
    distill.add_argument("method", choices=sorted(DISTILLATION_METHODS), help="Distillation method.")
    return parser


def _version_line() -> str:
    """``compact-bert X (torch Y, transformers Z)``: the versions a bug report needs."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"compact-bert {installed('compact-bert')} (torch {installed('torch')}, "
        f"transformers {installed('transformers')})"
    )


def main(argv: list[str] | None = None) -> int:
    """Run one command. Every failure ends as one line on stderr, ``compact-bert: <what failed>: <why>``, and exit
    status 1 (``describe_failure``); ``compact-bert --debug COMMAND ...`` or ``$COMPACT_BERT_DEBUG`` shows the
    traceback instead."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    # Only before the command: training commands have TrainingArguments' own `--debug OPTION`.
    while argv[:1] == ["--debug"]:
        argv.pop(0)
        debug = True
    try:
        return _dispatch(argv)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        if debug:
            raise
        print(interrupted_message(argv), file=sys.stderr, flush=True)
        # Exit promptly: the interpreter's final garbage collection walks every object a training run built
        # (tokenised data sets, model graphs), which took 10-13 s on a loaded 2-core machine, longer than a user
        # waits after Ctrl-C. Frozen objects are skipped by that walk and still freed by reference counting.
        gc.freeze()
        raise SystemExit(130) from None  # the shell's status for a command ended by SIGINT
    except Exception as error:
        if debug:
            raise
        raise SystemExit(describe_failure(error)) from error
    finally:  # a later command run without main() (a recipe calling finetune) must not inherit these arguments
        record_invocation(None)


def interrupted_message(argv: list[str]) -> str:
    """The one line Ctrl-C prints: what the interrupted command leaves, which is always safe to use or to ignore."""
    command = next((word for word in argv if not word.startswith("-")), "")
    if any(tuple(argv[: len(prefix)]) == prefix for prefix in TRAINING_COMMANDS):
        kept = (
            "checkpoints that were completely saved stay in the output folder (--resume_from_checkpoint last "
            "continues from the newest; an incomplete one is never resumed from), and the run is not finished "
            "(no run_summary.json)."
        )
    elif command == "export":
        kept = "the output folder is as it was: an export moves its files into place only once they are checked."
    elif command == "push":
        kept = "a push is one commit: the repository holds all of it or none of it."
    elif command == "convert":
        kept = "the target folder may be incomplete: run convert again before using it."
    else:
        kept = "it writes no files."
    return f"compact-bert: interrupted (Ctrl-C); {kept}"


def one_line_message(message: str) -> str:
    """``compact-bert: <what failed>: <why>`` from a command's exit message: ``compact-bert export: X`` becomes
    ``compact-bert: export: X``; a message without the prefix gets it."""
    if message.startswith("compact-bert: "):
        return message
    command = re.match(r"compact-bert ([a-z ]+): ", message)
    if command:
        return f"compact-bert: {command.group(1)}: {message[command.end() :]}"
    return f"compact-bert: {message}"


def describe_failure(error: BaseException) -> str:
    """The one line a failure prints: a file-system error names its path (``OSError.filename``); an error nobody
    anticipated says so and how to get what a report needs."""
    if isinstance(error, OSError) and error.filename is not None:
        paths = " -> ".join(str(path) for path in (error.filename, error.filename2) if path is not None)
        reason = error.strerror or str(error)
        return f"compact-bert: {paths}: {reason}"
    if isinstance(error, MemoryError):
        return "compact-bert: out of memory: use a smaller batch (--per_device_train_batch_size) or model."
    detail = f"{type(error).__name__}: {error}".strip().rstrip(":")
    return (
        f"compact-bert: internal error ({detail}). This is a bug in compact-bert or in how it calls a library: "
        f"run it again as `compact-bert --debug ...` (or with {DEBUG_VARIABLE}=1) and report the traceback it prints."
    )


def _dispatch(argv: list[str]) -> int:
    record_invocation(argv)
    if not sys.stderr.isatty():
        _without_progress_bars()
    if "--verbose" in argv:  # before the command's own parser: every command has it
        argv.remove("--verbose")
        os.environ[VERBOSE_VARIABLE] = "1"
    for prefix, module_name in TRAINING_COMMANDS.items():
        if tuple(argv[: len(prefix)]) == prefix:
            module = importlib.import_module(f"{__package__}.{module_name}")
            return _run_training(module, argv[len(prefix) :])
    args = build_parser().parse_args(argv)
    from ..training.run_errors import RunSettingsError

    try:
        return args.handler(args)
    except RunSettingsError as error:
        raise SystemExit(f"compact-bert: {error}") from error
    except SystemExit as error:  # the same one-line form for every command's early exit with a message
        if isinstance(error.code, str) and error.code != one_line_message(error.code):
            raise SystemExit(one_line_message(error.code)) from error
        raise


def _without_progress_bars() -> None:
    """Without a terminal, the libraries' own progress bars (transformers' "Loading weights" and "Writing model
    shards", the Hub's downloads, datasets' maps) would fill a log file with redrawn lines: they are turned off."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    try:
        import datasets
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        return
    disable_progress_bars()
    datasets.disable_progress_bars()


def _run_training(module, argv: list[str]) -> int:
    """Settings or data that cannot make a run, a refused precision or a diverged run end the command with its
    message and exit status 1, not a traceback: each is the user's settings, not a bug."""
    from ..training.loss_guard import TrainingDivergedError
    from ..training.precision_checks import UnsupportedPrecisionError
    from ..training.run_errors import RunSettingsError

    try:
        status = module.run(argv)
    except (RunSettingsError, TrainingDivergedError, UnsupportedPrecisionError) as error:
        _close_process_group(wait_for_others=False)
        raise SystemExit(f"compact-bert: {error}") from error
    except SystemExit as error:  # a command's own early exit with a message: the same one-line form
        if isinstance(error.code, str) and error.code != one_line_message(error.code):
            _close_process_group(wait_for_others=False)
            raise SystemExit(one_line_message(error.code)) from error
        raise
    _close_process_group(wait_for_others=True)
    return status


def _close_process_group(wait_for_others: bool) -> None:
    """End a multi-process run explicitly. A rank that finishes while the main process still writes the summary
    and card would otherwise exit with gloo's threads alive and abort in C++ teardown ("terminate called without
    an active exception"), failing the launcher. The barrier lets every rank leave together; after an error the
    other ranks may never reach it, so only the group is destroyed. The finished run's trainer, with its DDP
    wrapper whose reducer holds the group, is garbage in reference cycles by now: collecting it first frees the
    group's last users while the interpreter is alive, not during its shutdown, where that aborts too."""
    import gc

    import torch.distributed as distributed

    if not (distributed.is_available() and distributed.is_initialized()):
        return
    gc.collect()
    if wait_for_others:
        distributed.barrier()
    distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
