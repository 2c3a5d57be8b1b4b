"""The module files of a sentence-transformers folder, read and written without importing sentence-transformers.

A sentence-transformers model folder is a transformers model folder (``config.json``, weights, tokenizer) plus:

- ``modules.json``: the pipeline, one entry per module (``Transformer`` at the root, ``Pooling`` in ``1_Pooling``,
  optionally ``Dense`` in ``2_Dense``, optionally ``Normalize``);
- ``sentence_bert_config.json``: the Transformer module's ``max_seq_length`` and ``do_lower_case``;
- ``1_Pooling/config.json``: which pooling (``pooling_mode_mean_tokens`` ...) and the embedding width;
- ``2_Dense/config.json`` + ``model.safetensors``: a linear projection (``linear.weight``, ``linear.bias``);
- ``config_sentence_transformers.json``: versions, the similarity function (cosine) and prompts.

The writer emits the module type strings that every sentence-transformers release since 2.0 loads
(``sentence_transformers.models.Pooling`` ...), as the packaged all-MiniLM-L6-v2 carries them. The reader accepts
the same and the one-word forms newer releases also write, and refuses anything it cannot reproduce with the file
and entry named, so that an embedding is never computed differently from how sentence-transformers computes it.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..training.atomic_files import write_text_atomically
from ..training.run_errors import RunSettingsError
from .pooling import POOLING_MODES, SentenceEmbedder

__all__ = [
    "EmbeddingHead",
    "SentenceFolderError",
    "has_sentence_transformers_modules",
    "load_sentence_embedder",
    "read_embedding_head",
    "save_sentence_embedder",
    "write_sentence_transformers_modules",
]

MODULES_FILE = "modules.json"
# Pooling config key of each mode; sentence-transformers' other modes (weighted mean, last token) are not supported.
_POOLING_KEYS = {
    "cls": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
}
_UNSUPPORTED_POOLING_KEYS = ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")
_IDENTITY_ACTIVATIONS = ("torch.nn.modules.linear.Identity", "torch.nn.Identity", "Identity")
# Type strings by module, in the forms the releases write (the first is what this writer emits).
_MODULE_TYPES = {
    "Transformer": ("sentence_transformers.models.Transformer",),
    "Pooling": ("sentence_transformers.models.Pooling",),
    "Dense": ("sentence_transformers.models.Dense",),
    "Normalize": ("sentence_transformers.models.Normalize",),
}
_PROJECTION_FILE = "model.safetensors"


class SentenceFolderError(RunSettingsError):
    """A folder is not a sentence-transformers model this project can reproduce; the message names the file."""


@dataclass
class EmbeddingHead:
    """What turns an encoder's token embeddings into the folder's sentence embedding."""

    pooling: str = "mean"
    normalize: bool = True
    max_seq_length: int = 256
    projection: dict | None = field(default=None, repr=False)  # {"weight": [out, in], "bias": [out] | None}


def _module_kind(entry: dict, path: Path) -> str:
    type_name = str(entry.get("type", ""))
    short = type_name.rsplit(".", 1)[-1]
    if short not in _MODULE_TYPES or not (type_name == short or type_name.startswith("sentence_transformers.")):
        raise SentenceFolderError(
            f"{path}: module {entry.get('idx', '?')} has type {type_name!r}; this project reproduces "
            f"{', '.join(types[0] for types in _MODULE_TYPES.values())} only."
        )
    return short


def _read_json(path: Path) -> dict | list:
    if not path.is_file():
        raise SentenceFolderError(f"{path} is missing: the folder's {MODULES_FILE} refers to it.")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SentenceFolderError(f"{path} is not valid JSON: {error}.") from None


def _module_folder(folder: Path, entry: dict, modules_path: Path) -> Path:
    """A module's folder, which must lie inside ``folder``: an absolute path, ``..`` or a link out of it would make
    loading read weights from elsewhere (sentence-transformers refuses such paths too)."""
    relative = str(entry.get("path", ""))
    module_folder = folder / relative
    inside = folder.resolve()
    if Path(relative).is_absolute() or not (
        module_folder.resolve() == inside or inside in module_folder.resolve().parents
    ):
        raise SentenceFolderError(
            f"{modules_path}: module {entry.get('name', entry.get('idx'))!r} has path {relative!r}, which leads "
            f"outside {folder}; a module's path must be a folder inside it (e.g. '1_Pooling')."
        )
    return module_folder


def has_sentence_transformers_modules(folder: str | Path) -> bool:
    return (Path(folder) / MODULES_FILE).is_file()


def read_embedding_head(folder: str | Path) -> EmbeddingHead:
    """The pooling, projection, normalisation and length limit of a sentence-transformers folder."""
    folder = Path(folder)
    modules_path = folder / MODULES_FILE
    if not modules_path.is_file():
        raise SentenceFolderError(
            f"{folder} is not a sentence-transformers folder (no {MODULES_FILE}): give its pooling explicitly "
            f"(--pooling {'/'.join(POOLING_MODES)}) or use a folder saved by sentence-transformers."
        )
    modules = _read_json(modules_path)
    if not isinstance(modules, list) or not all(isinstance(entry, dict) for entry in modules):
        raise SentenceFolderError(f"{modules_path} must be a JSON list of module entries.")
    kinds = [_module_kind(entry, modules_path) for entry in modules]
    expected_order = ["Transformer", "Pooling", "Dense", "Normalize"]
    if (
        kinds[:2] != ["Transformer", "Pooling"]
        or any(expected_order.index(a) >= expected_order.index(b) for a, b in itertools.pairwise(kinds))
        or len(set(kinds)) != len(kinds)
    ):
        raise SentenceFolderError(
            f"{modules_path}: modules {kinds}; this project reproduces Transformer, Pooling, then optionally Dense "
            "and Normalize, in that order."
        )
    head = EmbeddingHead(normalize="Normalize" in kinds)
    bert_config_path = folder / "sentence_bert_config.json"
    if bert_config_path.is_file():
        settings = _read_json(bert_config_path)
        head.max_seq_length = int(settings.get("max_seq_length") or head.max_seq_length)
        if settings.get("do_lower_case"):
            raise SentenceFolderError(
                f"{bert_config_path}: do_lower_case true (lower-casing outside the tokenizer) "
                "is not supported; lower-case in the tokenizer instead."
            )
    else:  # sentence-transformers 6 keeps the length in the tokenizer's configuration instead
        tokenizer_config = folder / "tokenizer_config.json"
        length = _read_json(tokenizer_config).get("model_max_length") if tokenizer_config.is_file() else None
        if isinstance(length, int) and 0 < length < 100_000:  # transformers writes a huge number for "no limit"
            head.max_seq_length = length
    for entry, kind in zip(modules, kinds):
        module_folder = _module_folder(folder, entry, modules_path)
        if kind == "Pooling":
            head.pooling = _read_pooling(module_folder / "config.json")
        elif kind == "Dense":
            head.projection = _read_projection(module_folder)
    return head


def _read_pooling(path: Path) -> str:
    settings = _read_json(path)
    unsupported = [key for key in _UNSUPPORTED_POOLING_KEYS if settings.get(key)]
    modes = [mode for mode, key in _POOLING_KEYS.items() if settings.get(key)]
    if "pooling_mode" in settings and not modes:  # the single-string form of newer releases
        modes = [
            {
                "mean_tokens": "mean",
                "cls_token": "cls",
                "max_tokens": "max",
                "mean_sqrt_len_tokens": "mean_sqrt_len",
            }.get(str(settings["pooling_mode"]), str(settings["pooling_mode"]))
        ]
    if unsupported or len(modes) != 1 or modes[0] not in POOLING_MODES:
        raise SentenceFolderError(
            f"{path}: pooling {unsupported or modes or 'none'}; exactly one of {', '.join(_POOLING_KEYS.values())} "
            "must be true."
        )
    return modes[0]


def _read_projection(folder: Path) -> dict:
    settings = _read_json(folder / "config.json")
    activation = settings.get("activation_function", _IDENTITY_ACTIVATIONS[0])
    if activation not in _IDENTITY_ACTIVATIONS:
        raise SentenceFolderError(
            f"{folder / 'config.json'}: activation_function {activation!r}; only the identity is supported."
        )
    if (folder / _PROJECTION_FILE).is_file():
        state = load_file(str(folder / _PROJECTION_FILE))
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise SentenceFolderError(f"{folder} has no {_PROJECTION_FILE} (the Dense module's weights).")
    weight = state.get("linear.weight")
    expected = (settings.get("out_features"), settings.get("in_features"))
    if weight is None or tuple(weight.shape) != expected:
        raise SentenceFolderError(
            f"{folder}: linear.weight has shape {None if weight is None else tuple(weight.shape)}, its config "
            f"says {expected}."
        )
    return {"weight": weight, "bias": state.get("linear.bias") if settings.get("bias", True) else None}


def load_sentence_embedder(
    folder: str | Path, head: EmbeddingHead | None = None, role: str = "model folder", **from_pretrained
) -> SentenceEmbedder:
    """The folder's encoder (``AutoModel``, its weights checked: ``checked_loading``) with its sentence-transformers
    head (or ``head`` where given); ``role`` names the folder in errors."""
    import transformers

    from .. import modeling  # noqa: F401  (registers the compact-bert Auto classes)
    from ..training.checked_loading import load_checked

    head = head or read_embedding_head(folder)
    encoder = load_checked(transformers.AutoModel, folder, role, **from_pretrained)
    projection = None
    if head.projection is not None:
        weight, bias = head.projection["weight"], head.projection["bias"]
        projection = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        with torch.no_grad():
            projection.weight.copy_(weight)
            if bias is not None:
                projection.bias.copy_(bias)
    return SentenceEmbedder(encoder, head.pooling, projection, head.normalize, head.max_seq_length)


def write_sentence_transformers_modules(folder: str | Path, embedder: SentenceEmbedder) -> None:
    """Write the module files of ``embedder``'s head into ``folder`` (which holds, or will hold, its encoder)."""
    import transformers

    folder = Path(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": _MODULE_TYPES["Transformer"][0]},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": _MODULE_TYPES["Pooling"][0]},
    ]
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    pooling = {key: embedder.pooling == mode for mode, key in _POOLING_KEYS.items()}
    _write_json(
        folder / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": embedder.encoder.config.hidden_size,
            **pooling,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    if embedder.projection is not None:
        index = len(modules)
        dense = folder / f"{index}_Dense"
        dense.mkdir(exist_ok=True)
        linear = embedder.projection
        _write_json(
            dense / "config.json",
            {
                "in_features": linear.in_features,
                "out_features": linear.out_features,
                "bias": linear.bias is not None,
                "activation_function": _IDENTITY_ACTIVATIONS[0],
            },
        )
        state = {"linear.weight": linear.weight.detach().cpu().contiguous()}
        if linear.bias is not None:
            state["linear.bias"] = linear.bias.detach().cpu().contiguous()
        save_file(state, str(dense / _PROJECTION_FILE), metadata={"format": "pt"})
        modules.append({"idx": index, "name": str(index), "path": dense.name, "type": _MODULE_TYPES["Dense"][0]})
    if embedder.normalize:
        index = len(modules)
        (folder / f"{index}_Normalize").mkdir(exist_ok=True)
        modules.append(
            {"idx": index, "name": str(index), "path": f"{index}_Normalize", "type": _MODULE_TYPES["Normalize"][0]}
        )
    _write_json(folder / MODULES_FILE, modules)
    _write_json(
        folder / "sentence_bert_config.json", {"max_seq_length": embedder.max_seq_length, "do_lower_case": False}
    )
    _write_json(
        folder / "config_sentence_transformers.json",
        {
            "__version__": {"transformers": transformers.__version__, "pytorch": torch.__version__},
            "model_type": "SentenceTransformer",
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )


def save_sentence_embedder(embedder: SentenceEmbedder, folder: str | Path, tokenizer=None) -> None:
    """A complete sentence-transformers folder: the encoder (``save_pretrained``, remote code included), the
    tokenizer and the module files."""
    from ..training.compat import save_tokenizer

    folder = Path(folder)
    embedder.encoder.save_pretrained(folder)
    if tokenizer is not None:
        save_tokenizer(tokenizer, folder)
    write_sentence_transformers_modules(folder, embedder)


def _write_json(path: Path, value) -> None:
    write_text_atomically(path, json.dumps(value, indent=2) + "\n")
