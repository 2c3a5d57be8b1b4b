"""Entry point of the ``compact-bert`` command."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compact-bert", description=__doc__)
    parser.add_subparsers(dest="command", required=True)
    args = parser.parse_args(argv)
    return 0 if args else 1


if __name__ == "__main__":
    sys.exit(main())
