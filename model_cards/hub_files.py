"""Which files of a model folder belong on the Hub: an explicit allow-list, and a deny-list that beats it.

A training command's output folder is also its working folder: Trainer checkpoints (``checkpoint-*/``, each a
full copy of the weights plus optimizer state), TensorBoard ``runs/``, ``loss_terms.png`` and ``run_summary.json``
(absolute local paths) stay there, because resuming and inspecting a run need them. What a user ships is chosen
here instead of by cleaning the folder: only files a loader, a runtime or a reader of the repo uses, and never a
pickle (``*.bin``, ``*.pt``, ``*.pth``, ``*.pkl``, ...), which executes code when it is loaded.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

__all__ = [
    "EXPORT_FOLDERS",
    "HUB_FILE_PATTERNS",
    "MODULE_FOLDER_PATTERN",
    "NEVER_SHIPPED",
    "excluded_files",
    "hub_files",
    "symbolic_links",
]

# Matched against the name of a file directly in the model folder.
HUB_FILE_PATTERNS = (
    "*.safetensors",
    "model.safetensors.index.json",  # weights (and the index of sharded weights)
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "configuration_*.py",
    "modeling_*.py",  # the remote code that `trust_remote_code=True` loads
    "adapter_config.json",  # a PEFT adapter folder (its weights are *.safetensors)
    "README.md",  # the model card
    "*.onnx",
    "*.onnx_data",
    "*.tflite",  # exports saved next to the weights
    "latency.json",  # measured latency the card reports (evaluation/latency_report.py)
    # a sentence-transformers folder's pipeline (an embedding student): without them the Hub copy loses its pooling
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
)
# sentence-transformers keeps each module's settings in a numbered folder (``1_Pooling/config.json``,
# ``2_Dense/model.safetensors``): shipped whole, minus the deny-list.
MODULE_FOLDER_PATTERN = "[0-9]*_*"
# Export tools write a folder of their own (the ONNX model plus its config and tokenizer files): shipped whole,
# minus the deny-list.
EXPORT_FOLDERS = ("onnx", "tflite")
# Pickles and what never belongs in a model repo, wherever it is.
NEVER_SHIPPED = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt", "*.npy", "*.npz", ".*")


def _allowed(relative: str) -> bool:
    parts = relative.split("/")
    if any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in NEVER_SHIPPED):
        return False
    if len(parts) == 1:
        return any(fnmatch.fnmatch(relative, pattern) for pattern in HUB_FILE_PATTERNS)
    return parts[0] in EXPORT_FOLDERS or (len(parts) == 2 and fnmatch.fnmatch(parts[0], MODULE_FOLDER_PATTERN))


def _walk(folder: Path) -> tuple[list[str], list[str]]:
    """``(files, links)`` under ``folder`` as sorted relative paths: regular files reached without following any
    symbolic link, and the links met on the way (never followed, never uploaded: a link can point anywhere on the
    machine, ``/etc/passwd`` included) — symbolic links, and hard links: a file with more than one name, or owned by
    another user, is the same data as a file elsewhere, which nothing in the folder's listing shows."""
    files, links = [], []
    for root, directories, names in os.walk(folder, followlinks=False):
        base = Path(root)
        for name in list(directories):
            if (base / name).is_symlink():
                links.append((base / name).relative_to(folder).as_posix())
                directories.remove(name)
        for name in names:
            path = base / name
            relative = path.relative_to(folder).as_posix()
            if path.is_symlink() or (path.is_file() and _hard_linked(path)):
                links.append(relative)
            elif path.is_file():
                files.append(relative)
    return sorted(files), sorted(links)


def _hard_linked(path: Path) -> bool:
    status = path.stat()
    return status.st_nlink > 1 or (hasattr(os, "getuid") and status.st_uid != os.getuid())


def _all_files(folder: Path) -> list[str]:
    return _walk(folder)[0]


def symbolic_links(folder: str | Path) -> list[str]:
    """The links inside ``folder`` (symbolic links to files or folders, hard-linked files), which ``push`` leaves
    out and names."""
    return _walk(Path(folder))[1]


def hub_files(folder: str | Path) -> list[str]:
    """The files of ``folder`` to upload, as sorted paths relative to it."""
    folder = Path(folder)
    return [relative for relative in _all_files(folder) if _allowed(relative)]


def excluded_files(folder: str | Path) -> list[str]:
    """The files of ``folder`` that stay local (checkpoints, logs, pickles, plots, the run summary)."""
    folder = Path(folder)
    return [relative for relative in _all_files(folder) if not _allowed(relative)]
