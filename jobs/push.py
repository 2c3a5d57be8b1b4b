"""Pushing a model folder to the Hub: the listing of what is uploaded (``model_cards.hub_files``' allow-list) and the
one commit that uploads it. ``compact-bert push`` checks its arguments and calls these; the main job prints the
listing of its student.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["print_upload_listing", "upload_folder"]


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


def upload_folder(
    folder: Path,
    files: list[str],
    repo_id: str,
    token: str,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
) -> str:
    """One commit with exactly ``files`` (what the listing printed), on ``revision`` (created if missing); the
    commit's URL."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    if revision:
        api.create_branch(repo_id, branch=revision, exist_ok=True)
    model_type = json.loads((folder / "config.json").read_text()).get("model_type", "")
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in files]
    info = api.create_commit(
        repo_id,
        operations,
        revision=revision,
        commit_message=commit_message or f"Upload {model_type} model with compact-bert",
    )
    return info.commit_url or f"{repo_id}@{info.oid}"
