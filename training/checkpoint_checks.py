"""Checks that a loaded checkpoint is the model its config describes, with errors that name the config field.

transformers reports a config that disagrees with the weights as a bare size mismatch (4.57: "size mismatch for
bias" of some submodule; 5.x: "You set `ignore_mismatched_sizes` to `False`" after a table), silently drops the
weights of layers beyond ``num_hidden_layers`` and randomly initializes the missing ones, and loads a tensor whose
bytes were overwritten with NaN or inf without a word, so every output is NaN. ``checked_loading.load_checked``, the
way every compact-bert command loads a folder, loads with transformers' own machinery (the model classes override
nothing of it) and then hands the loading report to ``check_loaded_checkpoint``, which behaves the same on both
lines:

- a tensor whose shape disagrees with the config fails, naming the config field(s), the config's value and the
  checkpoint's shape — unless ``ignore_mismatched_sizes=True`` and every such tensor belongs to a task head
  (fine-tuning a saved model with a new number of labels), which transformers then re-initializes;
- a checkpoint with more or fewer encoder layers than ``num_hidden_layers`` fails;
- a non-finite floating-point tensor fails, naming the tensor(s) and the checkpoint.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import torch

from .run_errors import RunSettingsError

__all__ = ["CheckpointMismatchError", "check_loaded_checkpoint", "checkpoint_tensor_names"]

# Config fields a tensor dimension can be; the first whose value matches a differing dimension is named, after
# the fields that the tensor's name points at (``_FIELDS_BY_TENSOR_NAME``).
_SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "moe_intermediate_size",
    "num_experts",
    "num_attention_experts",
    "embedding_size",
    "intra_bottleneck_size",
    "max_position_embeddings",
    "type_vocab_size",
    "num_labels",
    "num_attention_heads",
)
_FIELDS_BY_TENSOR_NAME = (
    (re.compile(r"attention.*experts|attention.*router"), "num_attention_experts"),
    (re.compile(r"experts|router"), "num_experts"),
    (re.compile(r"word_embeddings|predictions\.(bias|decoder)"), "vocab_size"),
    (re.compile(r"position_embeddings"), "max_position_embeddings"),
    (re.compile(r"token_type_embeddings"), "type_vocab_size"),
    (re.compile(r"classifier|qa_outputs"), "num_labels"),
    (re.compile(r"intermediate|ffn"), "intermediate_size"),
)
_LAYER_INDEX = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")
_SHOWN_PER_FIELD = 3


class CheckpointMismatchError(RunSettingsError):
    """The checkpoint's weights do not fit the config, or hold non-finite values."""


def check_loaded_checkpoint(
    model, loading_info: dict, source, ignore_mismatched_sizes: bool, hub_kwargs: dict
) -> None:
    """Raise ``CheckpointMismatchError`` for what the module docstring lists; ``loading_info`` is the dict that
    ``from_pretrained(..., output_loading_info=True)`` returns on either transformers line."""
    problems = _layer_count_problems(model, loading_info)
    mismatched = _mismatched_shapes(model, loading_info.get("mismatched_keys") or (), source, hub_kwargs)
    if ignore_mismatched_sizes:
        mismatched = [entry for entry in mismatched if not _in_task_head(model, entry[0])]
    problems += _describe_mismatches(model.config, mismatched)
    if problems:
        head_hint = (
            ""
            if ignore_mismatched_sizes
            else " (`ignore_mismatched_sizes=True` re-initializes task-head tensors only, e.g. for a new number of labels)"
        )
        raise CheckpointMismatchError(
            f"The config of {type(model).__name__} disagrees with the checkpoint at {source}: "
            + "; ".join(problems)
            + f". Load it with the config it was saved with, or fix the field(s) in config.json{head_hint}."
        )
    _check_finite(model, source, hub_kwargs)


def _in_task_head(model, key: str) -> bool:
    """Tensors outside the base model: a classifier or other head, not embeddings, encoder or pooler."""
    prefix = getattr(model, "base_model_prefix", "")
    has_backbone = bool(prefix) and getattr(model, prefix, None) is not None and model.base_model is not model
    return has_backbone and not key.startswith(f"{prefix}.") and not key.startswith("cls.predictions.")


def _layer_count_problems(model, loading_info: dict) -> list[str]:
    """transformers only warns about these: extra layers are dropped, missing layers randomly initialized."""
    configured = model.config.num_hidden_layers
    extra = {
        int(match.group(1)) for key in loading_info.get("unexpected_keys") or () if (match := _LAYER_INDEX.search(key))
    }
    extra = {index for index in extra if index >= configured}
    if extra:
        return [
            f"`num_hidden_layers` is {configured} in the config but the checkpoint has {max(extra) + 1} encoder layers"
        ]
    missing = set(loading_info.get("missing_keys") or ())
    layer_keys: dict[int, set[str]] = {}
    for key in model.state_dict():
        if match := _LAYER_INDEX.search(key):
            layer_keys.setdefault(int(match.group(1)), set()).add(key)
    absent = sorted(index for index, keys in layer_keys.items() if keys <= missing)
    if absent and absent == list(range(absent[0], configured)):
        return [f"`num_hidden_layers` is {configured} in the config but the checkpoint has {absent[0]} encoder layers"]
    return []


def _mismatched_shapes(model, mismatched_keys, source, hub_kwargs) -> list[tuple[str, tuple, tuple]]:
    """(key, checkpoint shape, model shape) per mismatched tensor. transformers 5 reports the shapes; 4.57 only
    the keys, whose checkpoint shapes are then read from the safetensors headers (no tensor data is read)."""
    entries = [entry if isinstance(entry, tuple) else (entry, None, None) for entry in mismatched_keys]
    if not entries:
        return []
    parameters = dict(model.state_dict())
    header_shapes = None
    resolved = []
    for key, checkpoint_shape, model_shape in sorted(entries, key=lambda entry: entry[0]):
        if model_shape is None:
            model_key = key if key in parameters else key.split(".", 1)[-1]
            model_shape = tuple(parameters[model_key].shape) if model_key in parameters else None
        if checkpoint_shape is None:
            if header_shapes is None:
                header_shapes = {name: shape for name, (shape, _) in _checkpoint_headers(source, hub_kwargs).items()}
            prefix = f"{model.base_model_prefix}."
            for candidate in (key, prefix + key, key.removeprefix(prefix)):
                if candidate in header_shapes:
                    checkpoint_shape = header_shapes[candidate]
                    break
        resolved.append(
            (
                key,
                tuple(checkpoint_shape) if checkpoint_shape is not None else None,
                tuple(model_shape) if model_shape is not None else None,
            )
        )
    return resolved


def _describe_mismatches(config, mismatched) -> list[str]:
    """One sentence per config field: its value, the checkpoint's value and the tensors that show it."""
    by_field: dict[tuple[str, object, object], list[str]] = {}
    for key, checkpoint_shape, model_shape in mismatched:
        field, configured, saved = _field_of(config, key, checkpoint_shape, model_shape)
        shapes = f"{key} has shape {_shape(checkpoint_shape)} in the checkpoint, {_shape(model_shape)} in the model"
        by_field.setdefault((field, configured, saved), []).append(shapes)
    sentences = []
    for (field, configured, saved), tensors in by_field.items():
        more = f" (and {len(tensors) - _SHOWN_PER_FIELD} more tensors)" if len(tensors) > _SHOWN_PER_FIELD else ""
        if field is None:
            subject = "a size derived from the config differs"
        else:
            subject = f"{field} is {configured} in the config but {saved} in the checkpoint"
        sentences.append(f"{subject}: " + ", ".join(tensors[:_SHOWN_PER_FIELD]) + more)
    return sentences


def _field_of(config, key: str, checkpoint_shape, model_shape) -> tuple[str | None, object, object]:
    """The config field(s) (as text) whose value is the differing dimension of the model's tensor."""
    if checkpoint_shape is None or model_shape is None or len(checkpoint_shape) != len(model_shape):
        return None, None, None
    differing = [
        (model_size, saved) for model_size, saved in zip(model_shape, checkpoint_shape) if model_size != saved
    ]
    if not differing:
        return None, None, None
    model_size, saved = differing[0]
    values = {name: getattr(config, name, None) for name in _SIZE_FIELDS}
    hinted = [field for pattern, field in _FIELDS_BY_TENSOR_NAME if pattern.search(key)]
    matching = [name for name in hinted if values.get(name) == model_size]
    matching = matching[:1] or [name for name, value in values.items() if value == model_size]
    if not matching:
        return None, None, None
    return " or ".join(f"`{name}`" for name in matching), model_size, saved


def _shape(shape) -> str:
    return "unknown" if shape is None else f"[{', '.join(str(size) for size in shape)}]"


def _is_finite(tensor: torch.Tensor) -> bool:
    """A sum per tensor (no temporary, about 5 times faster than ``isfinite().all()`` on CPU) is NaN or infinite
    whenever an element is; only then, since a finite float32 sum could also overflow, is every element checked.
    Half-precision tensors are summed in float32, which their largest values cannot overflow."""
    accumulate = torch.float32 if tensor.element_size() < 4 else None
    return bool(torch.isfinite(tensor.sum(dtype=accumulate))) or bool(torch.isfinite(tensor).all())


def _check_finite(model, source, hub_kwargs) -> None:
    """One reduction per floating tensor: 0.13 s of the 1.4 s that loading MobileBERT with its MLM head (36.6M
    parameters) took on two busy CPU cores."""
    bad = [
        name
        for name, tensor in model.state_dict().items()
        if tensor.is_floating_point() and tensor.device.type != "meta" and not _is_finite(tensor)
    ]
    if not bad:
        return
    files = {name: file for name, (_, file) in _checkpoint_headers(source, hub_kwargs).items()}
    prefix = f"{model.base_model_prefix}."
    located = []
    for name in bad[:10]:
        file = next((files[key] for key in (name, prefix + name, name.removeprefix(prefix)) if key in files), None)
        located.append(f"{name} (in {file})" if file else name)
    more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
    raise CheckpointMismatchError(
        f"The checkpoint at {source} holds NaN or infinite values in {len(bad)} tensor(s): {', '.join(located)}{more}. "
        "The file is corrupted (or was saved from a diverged run); every output of this model would be NaN. "
        "Re-download it or load an earlier checkpoint."
    )


def checkpoint_tensor_names(source, hub_kwargs: dict) -> list[str]:
    """The tensor names in the safetensors headers of a local folder or a cached Hub repo (none when unreadable)."""
    return list(_checkpoint_headers(source, hub_kwargs))


def _checkpoint_headers(source, hub_kwargs: dict) -> dict[str, tuple[tuple, str]]:
    """Tensor name → (shape, file) from the safetensors headers of a local folder or a cached Hub repo; empty when
    the weights are not safetensors or cannot be found (the messages then say "unknown")."""
    files = []
    try:
        index = _resolve(source, "model.safetensors.index.json", hub_kwargs)
        if index is not None:
            shards = sorted(set(json.loads(Path(index).read_text(encoding="utf-8"))["weight_map"].values()))
            files = [_resolve(source, shard, hub_kwargs) for shard in shards]
        else:
            files = [_resolve(source, "model.safetensors", hub_kwargs)]
        headers = {}
        for file in files:
            if file is None:
                continue
            with open(file, "rb") as stream:
                (length,) = struct.unpack("<Q", stream.read(8))
                header = json.loads(stream.read(length))
            headers.update(
                {name: (tuple(entry["shape"]), str(file)) for name, entry in header.items() if name != "__metadata__"}
            )
        return headers
    except (OSError, ValueError, KeyError, struct.error):
        return {}


def _resolve(source, filename: str, hub_kwargs: dict):
    if source is None:
        return None
    folder = Path(str(source)) / (hub_kwargs.get("subfolder") or "")
    if folder.is_dir():
        path = folder / filename
        return path if path.is_file() else None
    from transformers.utils import cached_file

    try:
        return cached_file(
            str(source),
            filename,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
            **hub_kwargs,
        )
    except Exception:
        return None
