"""``compact-bert convert``: transformers MobileBERT checkpoints ↔ compact-bert MobileBERT."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..modeling.conversion import convert_checkpoint
from .training_common import invoked_command_line, write_summary_and_card

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="Convert a transformers MobileBERT checkpoint to compact-bert's format, or back.",
        description="The direction follows the source's config.json model_type: 'mobilebert' (e.g. the layout "
        "of google/mobilebert-uncased) becomes 'compact_mobilebert', and 'compact_mobilebert' becomes "
        "'mobilebert'. Weights carry over one to one; the command prints the largest output difference "
        "between source and converted model on a probe input.",
    )
    parser.add_argument("source", type=Path, help="Folder with config.json and weights.")
    parser.add_argument("target", type=Path, help="Output folder (created).")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not args.source.is_dir():
        raise SystemExit(f"convert: source {args.source} is not a folder.")
    summary = convert_checkpoint(args.source, args.target)
    # Recorded like a training run's summary, so that the target's model card states where it came from.
    write_summary_and_card(args.target, {"command_line": invoked_command_line(),
                                         "converted_from": str(args.source.resolve()), **summary})  # fmt: skip
    print(json.dumps({"target": str(args.target), **summary}, indent=2))
    return 0
