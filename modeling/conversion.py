"""Convert between transformers' MobileBERT checkpoints and compact-bert's MobileBERT family.

Both sides use the same module names, so the weights carry over one to one; only the config differs:
transformers' ``use_bottleneck_attention`` / ``key_query_shared_bottleneck`` flags become our
``attention_input`` and back. Numbers are identical for NoNorm models (the MobileBERT default). For
``normalization_type="layer_norm"`` checkpoints, transformers builds two of its LayerNorms with PyTorch's
default eps (1e-5) instead of ``layer_norm_eps``; ours use ``layer_norm_eps`` throughout, so outputs
differ by about 1e-3 there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
import transformers

from ..configuration import CompactMobileBertConfig
from ..models.compact_mobilebert import modeling_compact_mobilebert

__all__ = ["convert_checkpoint", "to_compact_config", "to_transformers_config"]

_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
_HEAD_SUFFIXES = (
    "Model",
    "ForPreTraining",
    "ForMaskedLM",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
)
_DROPPED_KEYS = ("model_type", "architectures", "transformers_version", "auto_map")


def to_compact_config(config: transformers.MobileBertConfig) -> CompactMobileBertConfig:
    fields = {key: value for key, value in config.to_dict().items() if key not in _DROPPED_KEYS}
    bottleneck_attention = fields.pop("use_bottleneck_attention")
    shared = fields.pop("key_query_shared_bottleneck")
    fields.pop("true_hidden_size", None)
    if bottleneck_attention:
        fields["attention_input"] = "intra_bottleneck"
    elif shared:
        fields["attention_input"] = "shared_bottleneck"
    else:
        if config.use_bottleneck and config.intra_bottleneck_size != config.hidden_size:
            raise ValueError(
                "This MobileBERT config has use_bottleneck_attention=False and key_query_shared_bottleneck=False "
                "with intra_bottleneck_size != hidden_size, which transformers' MobileBertModel cannot build; "
                "use compact-bert's IBBertConfig with attention_input='inter_block' for such a model."
            )
        fields["attention_input"] = "inter_block"
    return CompactMobileBertConfig(**fields)


def to_transformers_config(config: CompactMobileBertConfig) -> transformers.MobileBertConfig:
    fields = {key: value for key, value in config.to_dict().items() if key not in _DROPPED_KEYS}
    attention_input = fields.pop("attention_input")
    if (
        attention_input == "inter_block"
        and config.use_bottleneck
        and config.intra_bottleneck_size != config.hidden_size
    ):
        raise ValueError(
            "attention_input='inter_block' with a bottleneck cannot be expressed by transformers' MobileBertModel "
            "(its query/key/value layers expect intra_bottleneck_size inputs)."
        )
    fields["use_bottleneck_attention"] = attention_input == "intra_bottleneck"
    fields["key_query_shared_bottleneck"] = attention_input == "shared_bottleneck"
    return transformers.MobileBertConfig(**fields)


def _head_suffix(architectures: list[str] | None, prefix: str) -> str:
    architecture = (architectures or [f"{prefix}Model"])[0]
    suffix = architecture[len(prefix) :] if architecture.startswith(prefix) else None
    if suffix not in _HEAD_SUFFIXES:
        valid = ", ".join(prefix + s for s in _HEAD_SUFFIXES)
        raise ValueError(f"Cannot convert architecture {architecture!r}; convertible architectures: {valid}.")
    return suffix


def _probe_difference(source: torch.nn.Module, target: torch.nn.Module, vocab_size: int) -> float:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, vocab_size, (2, 24), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 16:] = 0
    with torch.no_grad():
        first = source.eval()(input_ids=input_ids, attention_mask=attention_mask)
        second = target.eval()(input_ids=input_ids, attention_mask=attention_mask)
    return max(
        (a - b).abs().max().item()
        for a, b in zip(first.to_tuple(), second.to_tuple())
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
    )


def convert_checkpoint(source_dir, target_dir) -> dict:
    """Convert ``source_dir`` (``mobilebert`` ↔ ``compact_mobilebert``) into ``target_dir``.

    Returns a summary with the direction, architecture and the largest output difference on a probe input.
    """
    source_dir, target_dir = Path(source_dir), Path(target_dir)
    config_path = source_dir / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} does not exist; pass a checkpoint folder with a config.json.")
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    model_type = raw.get("model_type")
    if model_type == "mobilebert":
        suffix = _head_suffix(raw.get("architectures"), "MobileBert")
        source = getattr(transformers, f"MobileBert{suffix}").from_pretrained(source_dir)
        target_config = to_compact_config(source.config)
        target_class = getattr(modeling_compact_mobilebert, f"CompactMobileBert{suffix}")
        direction = "transformers mobilebert -> compact_mobilebert"
    elif model_type == CompactMobileBertConfig.model_type:
        suffix = _head_suffix(raw.get("architectures"), "CompactMobileBert")
        source = getattr(modeling_compact_mobilebert, f"CompactMobileBert{suffix}").from_pretrained(source_dir)
        target_config = to_transformers_config(source.config)
        target_class = getattr(transformers, f"MobileBert{suffix}")
        direction = "compact_mobilebert -> transformers mobilebert"
    else:
        raise ValueError(
            f"{config_path}: model_type {model_type!r} cannot be converted; expected 'mobilebert' or "
            f"'{CompactMobileBertConfig.model_type}'."
        )
    target = target_class(target_config)
    target.load_state_dict(_transferable_state(source, target), strict=True)
    _save_with_tokenizer(target, source_dir, target_dir)
    return {
        "direction": direction,
        "architecture": type(target).__name__,
        "max_abs_difference": _probe_difference(source, target, target_config.vocab_size),
    }


def _save_with_tokenizer(target: torch.nn.Module, source_dir: Path, target_dir: Path) -> None:
    target.save_pretrained(target_dir)
    for name in _TOKENIZER_FILES:
        if (source_dir / name).is_file():
            shutil.copy2(source_dir / name, target_dir / name)


def _transferable_state(source: torch.nn.Module, target: torch.nn.Module) -> dict:
    """The source's weights, minus the one block transformers builds and never uses.

    With ``use_bottleneck_attention=True`` transformers' MobileBERT still creates the shared query/key
    bottleneck (``bottleneck.attention``) when ``key_query_shared_bottleneck`` keeps its default, but its
    forward returns before using it; our model has no such block. Any other mismatch is an error.
    """
    state = source.state_dict()
    unused = set(state) - set(target.state_dict())
    if (
        unused
        and all(".bottleneck.attention." in key for key in unused)
        and getattr(source.config, "use_bottleneck_attention", False)
    ):
        return {key: value for key, value in state.items() if key not in unused}
    return state
