"""``compact-bert push DIR REPO_ID``: upload a model folder's shippable files and its card to the Hub.

What is uploaded is ``model_cards.hub_files``' allow-list (weights, config, tokenizer, the two remote-code files,
the card, ONNX / TFLite exports, ``latency.json``), never checkpoints, logs or pickles; ``--dry-run`` prints that
list with sizes and the card, and touches neither the folder nor the network. Everything the user can get wrong
(the folder, the repo id, the missing token, offline mode) fails before the first request.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["add_parser", "check_push_arguments", "print_upload_listing", "run"]

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


def _size(size: int) -> str:
    """Bytes for people in SI units, as every size the project prints (1 MB = 10^6 bytes): 512 B, 4.2 kB, 8.1 MB."""
    if size < 1000:
        return f"{size} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if size < scale * 1000 or unit == "GB":
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def print_upload_listing(
    folder: Path,
    repo_id: str,
    revision: str | None = None,
    dry_run: bool = True,
    keep_card: bool = False,
    force: bool = False,
):
    """Print the files (with sizes) that a push of ``folder`` uploads and those it leaves out; return the file
    names and the card to upload (``None`` when the folder's README.md is kept as it is)."""
    from ..model_cards import MODEL_CARD_FILE, build_model_card, excluded_files, hub_files
    from ..model_cards.hub_files import symbolic_links
    from ..model_cards.model_card import card_was_edited

    links = symbolic_links(folder)
    if keep_card and MODEL_CARD_FILE in links:
        raise SystemExit(
            f"compact-bert push: {folder / MODEL_CARD_FILE} is a symbolic link; --keep-card uploads the "
            "folder's own card only: replace the link with the file."
        )
    card = None if keep_card else build_model_card(folder, repo_id)
    if card is not None and not dry_run and not force and card_was_edited(folder / MODEL_CARD_FILE):
        raise SystemExit(
            f"compact-bert push: {folder / MODEL_CARD_FILE} was edited since compact-bert wrote it (or was written by "
            "another tool); regenerating the card would lose that. --keep-card uploads it as it is, --force "
            "regenerates it."
        )
    files = sorted(set(hub_files(folder)) | {MODEL_CARD_FILE})
    if "config.json" not in files or not any(name.endswith((".safetensors", ".bin")) for name in files):
        raise SystemExit(
            f"compact-bert push: {folder}: its config.json or weights are links ({', '.join(links)}), which push "
            "never uploads: a repository without them would load nothing. Copy the files into the folder "
            "(cp -L) and push again."
        )
    sizes = {
        name: (
            len(str(card).encode()) if name == MODEL_CARD_FILE and card is not None else (folder / name).stat().st_size
        )
        for name in files
    }
    target = f"{repo_id}" + (f" (branch {revision})" if revision else "")
    print(
        f"{'Would upload' if dry_run else 'Uploading'} {len(files)} files ({_size(sum(sizes.values()))}) "
        f"from {folder} to {target}:"
    )
    for name in files:
        print(f"  {sizes[name]:>12}  {_size(sizes[name]):>9}  {name}")
    if links:
        print(
            f"Skipped {len(links)} link(s), never uploaded (a symbolic or hard link can point outside the folder): "
            + ", ".join(links)
        )
    left_out = excluded_files(folder)
    if left_out:
        print(
            f"Left out ({len(left_out)} files: checkpoints, logs, pickles, plots, run summary): "
            + ", ".join(left_out[:8])
            + (", ..." if len(left_out) > 8 else "")
        )
    return files, card


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
    commit_url = _upload(folder, files, args, token)
    print(f"Pushed to {commit_url}")
    return 0


def _upload(folder: Path, files: list[str], args: argparse.Namespace, token: str) -> str:
    """One commit with exactly ``files`` (what the listing printed), on ``--revision`` (created if missing)."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(token=token)
    repo_id = api.create_repo(args.repo_id, private=args.private, exist_ok=True).repo_id
    if args.revision:
        api.create_branch(repo_id, branch=args.revision, exist_ok=True)
    model_type = json.loads((folder / "config.json").read_text()).get("model_type", "")
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in files]
    info = api.create_commit(
        repo_id,
        operations,
        revision=args.revision,
        commit_message=args.commit_message or f"Upload {model_type} model with compact-bert",
    )
    return info.commit_url or f"{repo_id}@{info.oid}"
