"""compact-bert: compact and mixture-of-experts BERT models and their distillation."""

from __future__ import annotations

import argparse
import sys

from . import convert_command, presets_command

__all__ = ["build_parser", "main"]

_COMMANDS = (presets_command, convert_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compact-bert", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
