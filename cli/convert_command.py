"""``compact-bert convert``: transformers MobileBERT checkpoints ↔ compact-bert MobileBERT."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..jobs.run_report import invoked_command_line, write_summary_and_card
from ..modeling.conversion import convert_checkpoint
from ..training.output_folders import OutputOverwriteError, check_output_folder

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="Convert a transformers MobileBERT checkpoint to compact-bert's format, or back.",
        description="The direction follows the source's config.json model_type: 'mobilebert' (e.g. the layout "
        "of google/mobilebert-uncased) becomes 'compact_mobilebert', and 'compact_mobilebert' becomes "
        "'mobilebert'. Weights carry over one to one; the command prints the "
        "largest output difference between source and converted model on a probe input.",
    )
    parser.add_argument("source", type=Path, help="Folder with config.json and weights.")
    parser.add_argument(
        "target",
        type=Path,
        help="Output folder (created): not the source, not inside it, and not a folder that already holds a model.",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from safetensors import SafetensorError

    from ..training.checked_loading import unreadable_weights_file

    if not args.source.is_dir():
        raise SystemExit(f"convert: source {args.source} is not a folder.")
    if args.target.exists() and not args.target.is_dir():
        raise SystemExit(
            f"convert: target {args.target} is a file; give a folder path (created if it does not exist)."
        )
    try:  # before anything is loaded or written: the target never replaces the source or another model
        check_output_folder(args.target, "TARGET", {"SOURCE": args.source}, overwrite_flag=None, resume_flag=None)
    except OutputOverwriteError as error:
        raise SystemExit(f"convert: {error}") from None
    try:
        summary = convert_checkpoint(args.source, args.target)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"convert: {error}") from None
    except (SafetensorError, OSError) as error:
        raise SystemExit(
            f"convert: source {args.source}: its weights file {unreadable_weights_file(args.source)} "
            f"cannot be read ({error}): it is truncated or corrupt; save or download it again."
        ) from None
    # Recorded like a training run's summary, so that the target's model card states where it came from.
    write_summary_and_card(
        args.target, {"command_line": invoked_command_line(), "converted_from": str(args.source.resolve()), **summary}
    )
    print(json.dumps({"target": str(args.target), **summary}, indent=2))
    return 0
