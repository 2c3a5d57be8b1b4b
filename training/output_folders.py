"""What a command may write over: the one rule every command and job applies to its outputs before any work.

A command's output folder must not be one of its inputs, lie inside an input folder, or already hold a model or a
run, unless the user says so with ``--overwrite_output_dir`` (transformers' flag for the same choice; git refuses
to clone into a non-empty folder for the same reason). Without the rule, ``finetune --model_name_or_path X
--output_dir X`` replaced the model it read without a word, and a second run into a finished run's folder silently
replaced its model, card and summary. A run that resumes (``--resume_from_checkpoint``) continues the run the folder
holds, so for it a folder holding a run is expected.

A named output *file* (``benchmark --json``, ...) never replaces a file of a model folder (``config.json``, the
weights, the tokenizer, the card, ...), and a conversion never writes into a folder holding a model: neither has an
overwrite flag, since replacing one file of a model leaves a folder whose files no longer belong together (``convert
SRC SRC`` rewrote SRC's config and then reported its weights as "truncated or corrupt").

Everything here reads the file system only; nothing is created or removed.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable, Mapping
from pathlib import Path

from .run_errors import RunSettingsError

__all__ = [
    "INPUT_FIELDS",
    "MODEL_FILE_PATTERNS",
    "OutputOverwriteError",
    "check_export_output",
    "check_named_output_file",
    "check_output_folder",
    "check_run_output",
    "folder_holdings",
    "input_paths",
]

# The fields of the commands' arguments that name something a run reads: models, tokenizers, data and teacher caches.
# A value that is not an existing path (a preset, a dataset name on the Hub, 'auto') is no folder to protect.
INPUT_FIELDS = (
    "model_name_or_path",
    "tokenizer_name",
    "teacher",
    "init_from_teacher",
    "init_from",
    "train_file",
    "validation_file",
    "test_file",
    "finetune_train_file",
    "finetune_validation_file",
    "corpus",
    "eval_corpus",
    "dataset_name",
    "sentences",
    "sts_file",
    "teacher_cache_dir",
)

_WEIGHT_PATTERNS = (
    "*.safetensors",
    "pytorch_model*.bin",
    "*.safetensors.index.json",
    "adapter_model.bin",
    "tf_model.h5",
)
_EXPORT_PATTERNS = ("*.onnx", "*.tflite")
# Every file that belongs to a saved model folder: what a named output file may never replace.
MODEL_FILE_PATTERNS = (
    "config.json",
    "generation_config.json",
    "adapter_config.json",
    *_WEIGHT_PATTERNS,
    *_EXPORT_PATTERNS,
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "configuration_*.py",
    "modeling_*.py",
    "README.md",
    "run_summary.json",
    "trainer_state.json",
    "latency.json",
)
_SHOWN = 3  # file names listed per kind in a message


class OutputOverwriteError(RunSettingsError):
    """An output would replace an input, or a model or run that is already there."""


def _matching(folder: Path, patterns: Iterable[str]) -> list[str]:
    return sorted(
        path.name
        for path in folder.iterdir()
        if path.is_file() and any(fnmatch.fnmatch(path.name, p) for p in patterns)
    )


def _exports(folder: Path) -> list[str]:
    found = _matching(folder, _EXPORT_PATTERNS)
    for name in ("onnx", "tflite"):
        subfolder = folder / name
        if subfolder.is_dir() and _matching(subfolder, _EXPORT_PATTERNS):
            found.append(f"{name}/")
    return found


def folder_holdings(folder: str | Path, exports: bool = True) -> dict[str, list[str]]:
    """What of a model or a run ``folder`` holds, by kind (empty: nothing a run would replace). Kinds: ``model``
    (``config.json`` or ``adapter_config.json`` with weights), ``summary`` (``run_summary.json``, a finished run),
    ``state`` (``trainer_state.json``), ``checkpoints`` (``checkpoint-N`` folders) and, with ``exports``, ``export``
    (an ONNX or TFLite model, or its ``onnx/`` / ``tflite/`` folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    weights = _matching(folder, _WEIGHT_PATTERNS)
    configs = _matching(folder, ("config.json", "adapter_config.json"))
    found = {
        "model": configs + weights if configs and weights else [],
        "summary": _matching(folder, ("run_summary.json",)),
        "state": _matching(folder, ("trainer_state.json",)),
        "checkpoints": sorted(
            (path.name for path in folder.glob("checkpoint-*") if path.is_dir() and path.name[11:].isdigit()),
            key=lambda name: int(name[11:]),
        ),
        "export": _exports(folder) if exports else [],
    }
    return {kind: names for kind, names in found.items() if names}


def _is_unfinished(holdings: Mapping[str, list[str]]) -> bool:
    """Checkpoints and no run summary: a run that stopped before its end, which ``--resume_from_checkpoint last``
    continues."""
    return bool(holdings.get("checkpoints")) and "summary" not in holdings


def _describe(holdings: Mapping[str, list[str]]) -> str:
    def listed(names: list[str]) -> str:
        return ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")

    labels = {
        "model": "a model",
        "summary": "a finished run's summary",
        "state": "a trainer state",
        "checkpoints": "checkpoints of an unfinished run" if _is_unfinished(holdings) else "checkpoints",
        "export": "an exported model",
    }
    return ", ".join(f"{labels[kind]} ({listed(names)})" for kind, names in holdings.items())


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def input_paths(*arguments) -> dict[str, list[Path]]:
    """The existing paths that the dataclasses ``arguments`` name in their ``INPUT_FIELDS`` (lists included), by
    flag (``--teacher``); fields a dataclass lacks, unset values and names that are no path are left out."""
    found: dict[str, list[Path]] = {}
    for argument in arguments:
        names = {item.name for item in dataclasses.fields(argument)} if dataclasses.is_dataclass(argument) else set()
        for name in INPUT_FIELDS:
            value = getattr(argument, name, None) if name in names else None
            values = value if isinstance(value, (list, tuple)) else [value]
            for item in values:
                if isinstance(item, (str, Path)) and str(item).strip() and Path(item).expanduser().exists():
                    found.setdefault(f"--{name}", []).append(Path(item))
    return found


def _choices(ways: list[str]) -> str:
    """``["a", "b", "c"]`` as ``"A, b or c."``: the ways out of a refusal, as one sentence."""
    text = ways[0] if len(ways) == 1 else ", ".join(ways[:-1]) + " or " + ways[-1]
    return text[0].upper() + text[1:] + "."


def check_output_folder(
    folder: str | Path | None,
    flag: str,
    inputs: Mapping[str, Iterable[str | Path] | str | Path] | None = None,
    overwrite: bool = False,
    resuming: bool = False,
    *,
    name: str | None = None,
    overwrite_flag: str | None = "--overwrite_output_dir",
    resume_flag: str | None = "--resume_from_checkpoint last",
) -> None:
    """Refuse (``OutputOverwriteError``) an output ``folder`` that is one of ``inputs`` (flag -> paths), lies inside
    one of them, or already holds a model or a run (``folder_holdings``), unless ``overwrite``. ``resuming``: the run
    continues the one in ``folder``, so a run there is expected (an input is still refused).

    ``flag`` names the output in the message (``--output_dir``); ``name`` says what the folder is when the flag alone
    does not (``the teacher's folder``); ``overwrite_flag`` and ``resume_flag`` are the ways out the message offers
    (``None``: the command has no such flag)."""
    if folder is None or overwrite:
        return
    target = _resolved(folder)
    shown = f"{flag} {folder}" if name is None else f"{name} {folder} (from {flag})"
    forced = [f"pass {overwrite_flag} to write there anyway"] if overwrite_flag else []
    for input_flag, paths in (inputs or {}).items():
        for path in [paths] if isinstance(paths, (str, Path)) else paths:
            source = _resolved(path)
            if target == source:
                raise OutputOverwriteError(
                    f"{shown} is the {input_flag} this command reads: writing there would replace its own input. "
                    + _choices([f"choose another {flag}", *forced])
                )
            if source in target.parents:
                raise OutputOverwriteError(
                    f"{shown} lies inside {path}, the {input_flag} this command reads: its outputs would mix with "
                    "that input's files. " + _choices([f"choose a {flag} outside it", *forced])
                )
    if resuming:
        return
    holdings = folder_holdings(target)
    if not holdings:
        return
    ways = [f"resume it with {resume_flag}"] if resume_flag and _is_unfinished(holdings) else []
    if overwrite_flag:
        aside = " (its checkpoints are moved aside)" if holdings.get("checkpoints") else ""
        ways.append(f"pass {overwrite_flag} to replace it{aside}")
    ways.append(f"choose another {flag}")
    raise OutputOverwriteError(
        f"{shown} already holds {_describe(holdings)}: writing there would replace it. {_choices(ways)}"
    )


def check_run_output(training_args, *arguments, folders: Iterable[str | Path] = ()) -> None:
    """``check_output_folder`` for a training run: its ``--output_dir`` (and further ``folders`` it writes, e.g. a
    grid's run folders) against the inputs its ``arguments`` name (``input_paths``), with its
    ``--overwrite_output_dir`` and ``--resume_from_checkpoint``."""
    inputs = input_paths(*arguments, training_args)
    overwrite = bool(getattr(training_args, "overwrite_output_dir", False))
    resuming = bool(str(getattr(training_args, "resume_from_checkpoint", None) or "").strip())
    for folder in dict.fromkeys([training_args.output_dir, *folders]):
        check_output_folder(folder, "--output_dir", inputs, overwrite, resuming)


def check_named_output_file(path: str | Path | None, flag: str) -> None:
    """Refuse a named output file that would replace a file of a model folder: one of ``MODEL_FILE_PATTERNS`` in a
    folder that holds a model, a run or an export. Other files there (a benchmark's own JSON) may be written."""
    if path is None:
        return
    file = Path(path)
    holdings = folder_holdings(file.parent)
    if holdings and any(fnmatch.fnmatch(file.name, pattern) for pattern in MODEL_FILE_PATTERNS):
        raise OutputOverwriteError(
            f"{flag} {file} would replace {file.name} of the model in {file.parent}: the folder's files would no "
            "longer belong together. Write it to another file or folder."
        )


def check_export_output(output_dir: str | Path, model_dir: str | Path, flag: str = "OUTPUT_DIR") -> None:
    """An export writes its own folder: the model folder's ``onnx/`` or ``tflite/`` by design (only that subfolder
    is added, staged and moved into place), or any folder that is empty or holds an earlier export, which it replaces.
    Refused: an output path that is a file (of the model folder or elsewhere), and a folder that holds a model or a
    run — the model folder itself or another model's, whose ``config.json`` and tokenizer the export would replace."""
    output, model = Path(output_dir), Path(model_dir)
    if output.exists() and not output.is_dir():
        whose = "a file of the model folder" if _resolved(output.parent) == _resolved(model) else "a file"
        raise OutputOverwriteError(
            f"{flag} {output} is {whose}, not a folder: the export writes a folder of its own. Give a folder, "
            f"e.g. {model / 'onnx'}."
        )
    if _resolved(output) == _resolved(model):
        raise OutputOverwriteError(
            f"{flag} {output} is the model folder being exported: the export would replace its config.json and "
            f"tokenizer files. Export into a folder of its own, e.g. {model / 'onnx'}."
        )
    holdings = folder_holdings(output, exports=False)
    if holdings:
        raise OutputOverwriteError(
            f"{flag} {output} already holds {_describe(holdings)}: the export would replace that model's "
            f"config.json and tokenizer files. Export into a folder of its own, e.g. {model / 'onnx'}."
        )
