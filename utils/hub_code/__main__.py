"""``python -m utils.hub_code``: regenerate the committed model code (``models/``); ``--check``: fail if any is stale.

Run from the repository root after changing model or configuration code; CI runs ``--check``.
"""

from __future__ import annotations

import argparse
import sys

from .committed import stale_files, write_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.hub_code", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list stale files and exit 1 instead of rewriting")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        if stale:
            print("These generated files do not match their sources; run `python -m utils.hub_code`:")
            print("\n".join(f"  {name}" for name in stale))
            return 1
        print("The generated files (models/) match their sources.")
        return 0
    changed = write_files()
    print("\n".join(f"rewrote {name}" for name in changed) or "The generated files (models/) were up to date.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
