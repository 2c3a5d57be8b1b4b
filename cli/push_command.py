"""``compact-bert push DIR REPO_ID``: upload a model folder's shippable files and its card to the Hub.

What is uploaded is ``model_cards.hub_files``' allow-list (weights, config, tokenizer, the two remote-code files,
the card, ONNX / TFLite exports, ``latency.json``), never checkpoints, logs or pickles; ``--dry-run`` prints that
list with sizes and the card, and touches neither the folder nor the network. Everything the user can get wrong
(the folder, the repo id, the missing token, offline mode) fails before the first request.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..jobs.push import print_upload_listing, upload_folder

__all__ = ["add_parser", "check_push_arguments", "run"]

WEIGHT_SUFFIXES = (".safetensors",)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "push",
        help="Upload a model folder (weights, config, tokenizer, remote code, card, exports) to the Hub.",
        description="Creates the repo if needed and uploads, in one commit, the folder's files that belong on the "
        "Hub: *.safetensors, config.json, tokenizer files, configuration_*.py / modeling_*.py, README.md (the model "
        "card, regenerated with the repo id), *.onnx / *.tflite and the onnx/ and tflite/ export folders, "
        "latency.json. Checkpoints, runs/, plots, run_summary.json and pickles (*.bin, *.pt, *.pth, *.pkl) stay "
        "local. The token comes from --token, HF_TOKEN or `hf auth login`; HF_ENDPOINT selects the Hub.",
    )
    parser.add_argument("folder", type=Path, metavar="DIR", help="A saved model folder (config.json + weights).")
    parser.add_argument(
        "repo_id", metavar="REPO_ID", help="Target repo, 'namespace/name' (or 'name': your namespace)."
    )
    parser.add_argument(
        "--private", action="store_true", help="Create the repo as private (an existing repo keeps its visibility)."
    )
    parser.add_argument("--revision", default=None, help="Branch to push to; created from main if missing.")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="Print the files (with sizes) and the card that would be uploaded; upload and write nothing.",
    )
    parser.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN, else the stored login).")
    parser.add_argument(
        "--commit-message",
        default=None,
        help="Commit message (default: 'Upload <model_type> model with compact-bert').",
    )
    parser.add_argument(
        "--keep-card",
        action="store_true",
        help="Upload the folder's README.md as it is instead of "
        "regenerating the card (e.g. after editing it by hand).",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="Regenerate the card even if README.md was edited since compact-bert wrote it (the edit is lost).",
    )
    parser.set_defaults(handler=run)


def check_push_arguments(args: argparse.Namespace) -> str | None:
    """Raise ``SystemExit`` naming the argument for a folder that is not a model folder, an invalid repo id or
    revision; return the token (``None`` for a dry run, which needs none). No network access."""
    from huggingface_hub import constants, get_token
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    folder = args.folder
    if not folder.is_dir():
        raise SystemExit(f"push: DIR {folder} is not a folder; give a saved model folder.")
    if not (folder / "config.json").is_file() or not any(path.suffix in WEIGHT_SUFFIXES for path in folder.iterdir()):
        raise SystemExit(
            f"push: DIR {folder} is not a model folder: it needs config.json and *.safetensors weights "
            "directly inside it (e.g. a training command's --output_dir)."
        )
    if args.keep_card and not (folder / "README.md").is_file():
        raise SystemExit(f"push: --keep-card, but {folder} has no README.md to keep.")
    check_weights_load(folder)
    try:
        validate_repo_id(args.repo_id)
    except HFValidationError as error:
        raise SystemExit(
            f"push: REPO_ID {args.repo_id!r} is not a valid repo id ('namespace/name' of letters, digits, "
            f"'-', '_', '.'): {error}"
        ) from None
    if args.revision is not None and (not args.revision.strip() or args.revision.startswith(("refs/pr/", "/"))):
        raise SystemExit(
            f"push: --revision {args.revision!r} is not a branch name (pull-request refs cannot be "
            "pushed to directly)."
        )
    if args.dry_run:
        return None
    if constants.HF_HUB_OFFLINE:
        raise SystemExit("push: HF_HUB_OFFLINE is set, so the Hub cannot be reached; unset it (or use --dry-run).")
    token = args.token or get_token()
    if not token:
        raise SystemExit(
            "push: no Hub token; pass --token, set HF_TOKEN, or log in with `hf auth login` (a token with "
            "write access)."
        )
    return token


def check_weights_load(folder: Path) -> None:
    """The folder's model loads with every backbone weight from its files (``load_checked``): a truncated
    safetensors file or weights that do not fit the config fail here, before anything is listed as ready to
    upload — a dry run included."""
    import transformers

    from ..training.checked_loading import load_checked
    from ..training.compat import FROM_PRETRAINED_KWARGS
    from ..training.run_errors import RunSettingsError

    try:
        load_checked(transformers.AutoModel, folder, "push: DIR", **FROM_PRETRAINED_KWARGS)
    except RunSettingsError as error:
        raise SystemExit(str(error)) from None
    except (OSError, ValueError, KeyError) as error:
        raise SystemExit(f"push: DIR {folder}: its model does not load, so it is not pushed: {error}") from None


def run(args: argparse.Namespace) -> int:
    from ..model_cards import MODEL_CARD_FILE

    token = check_push_arguments(args)
    folder = args.folder
    files, card = print_upload_listing(
        folder, args.repo_id, args.revision, args.dry_run, args.keep_card, getattr(args, "force", False)
    )
    if args.dry_run:
        print(f"\n--- {MODEL_CARD_FILE} ---")
        print(card if card is not None else (folder / MODEL_CARD_FILE).read_text(encoding="utf-8"))
        return 0
    if card is not None:
        from ..model_cards.model_card import marked_card_text
        from ..training.atomic_files import write_text_atomically

        write_text_atomically(folder / MODEL_CARD_FILE, marked_card_text(card))
    commit_url = upload_folder(folder, files, args.repo_id, token, args.private, args.revision, args.commit_message)
    print(f"Pushed to {commit_url}")
    return 0
