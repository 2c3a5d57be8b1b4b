"""Dense students ship as their teacher's own architecture: transformers' BERT (or RoBERTa, ...), not a custom type.

A student with one FFN and one attention block per layer is a post-LN BERT, layer for layer: nothing in it needs
compact-bert's code. So it is built, initialized, trained and saved as transformers' own config and model classes —
``BertConfig`` when there is no teacher or the teacher is a BERT, the teacher's own class when the teacher is another
encoder whose layers are laid out as BERT's (RoBERTa, XLM-R, CamemBERT) — and every tool that takes a BERT folder
(serving stacks without remote code, optimum's exporters, embedding servers) takes the student as it is. Only
mixture-of-experts students (``num_experts`` or ``num_attention_experts`` > 1) and the four paper families keep
compact-bert's model types and their remote code.
"""

from __future__ import annotations

from transformers import AutoConfig, BertConfig, PretrainedConfig

from .validation import POSITIVE_INT, multiple_of, reject_unknown_fields, require

__all__ = [
    "BERT_LAYOUT_MODEL_TYPES",
    "SHAPE_FIELDS",
    "check_dense_fields",
    "dense_config",
    "dense_student_config",
    "is_dense",
    "is_dense_student",
    "max_sequence_length",
]

# transformers encoders whose modules are named and laid out as BertModel's (embeddings.{word,position,token_type}_
# embeddings, encoder.layer.<i>.attention.self.{query,key,value}, intermediate.dense, output.dense, post-LN): a
# student of the same class starts from the teacher's weights by copying them, and is the teacher's architecture cut
# down. Other teachers (DistilBERT, ALBERT, ...) lay their layers out otherwise; their students are BERT.
BERT_LAYOUT_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "camembert")
# Encoders whose position ids start after the padding id (RoBERTa's ``padding_idx + 1`` offset): a sequence of
# ``max_position_embeddings - pad_token_id - 1`` tokens fills their table.
PADDING_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl", "data2vec-text")
# The fields that make a student smaller than its teacher; everything else (vocabulary, positions, token types,
# activation, norm epsilon, padding id) is the teacher's, so that both read the same token ids the same way.
SHAPE_FIELDS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")
# Fields of a teacher's config that describe that one checkpoint, not the architecture a student inherits.
_CHECKPOINT_FIELDS = (
    "architectures",
    "id2label",
    "label2id",
    "num_labels",
    "problem_type",
    "finetuning_task",
    "_name_or_path",
    "name_or_path",
    "transformers_version",
    "model_type",
    "dtype",
    "torch_dtype",
    "auto_map",
    "teacher_initialization",
    "_attn_implementation_autoset",
    "output_attentions",
    "output_hidden_states",
)


def is_dense(config: PretrainedConfig) -> bool:
    """Whether ``config`` has no experts in its FFN or attention."""
    return getattr(config, "num_experts", 1) == 1 and getattr(config, "num_attention_experts", 1) == 1


def is_dense_student(config: PretrainedConfig) -> bool:
    """Whether ``config`` is a dense student as this module builds them: a transformers BERT-layout encoder."""
    return getattr(config, "model_type", None) in BERT_LAYOUT_MODEL_TYPES


def max_sequence_length(config: PretrainedConfig) -> int:
    """The longest sequence ``config``'s position table covers: ``max_position_embeddings``, less the rows before
    position 0 of a RoBERTa-like encoder (``PADDING_OFFSET_POSITIONS``)."""
    if getattr(config, "model_type", None) in PADDING_OFFSET_POSITIONS:
        return config.max_position_embeddings - (config.pad_token_id or 0) - 1
    return config.max_position_embeddings


def check_dense_fields(config_class: type, fields: dict) -> None:
    """Refuse what transformers' BERT would accept and then fail on (or silently ignore): unknown names (with the
    nearest real one), non-positive sizes, a width that the heads do not divide. Raises ``ValueError``."""
    reject_unknown_fields(config_class, fields)
    owner = config_class.__name__
    for field in (*SHAPE_FIELDS, "vocab_size", "max_position_embeddings"):
        if field in fields and not POSITIVE_INT[0](fields[field]):
            raise ValueError(f"{owner}: `{field}` must be {POSITIVE_INT[1]}, got {fields[field]!r}.")
    if "hidden_size" in fields or "num_attention_heads" in fields:
        config = config_class(**fields)
        require(config, multiple_of("num_attention_heads", config.num_attention_heads), "hidden_size")


_EXPERT_FIELDS = ("num_experts", "num_attention_experts")


def _without_single_experts(fields: dict) -> dict:
    """``fields`` less ``num_experts`` / ``num_attention_experts`` of 1 (what dense means); more experts are refused:
    they make a MiniMoE student, whose presets are ``minimoe-*``."""
    for key in _EXPERT_FIELDS:
        if key in fields and fields[key] != 1:
            raise ValueError(
                f"`{key}` {fields[key]!r}: this preset is a dense student (a plain BERT, one FFN and one attention "
                "block per layer); a student with experts starts from a MiniMoE preset (`compact-bert presets`: "
                'minimoe-*), e.g. minimoe-3l-384h with {"num_experts": 4}.'
            )
    return {key: value for key, value in fields.items() if key not in _EXPERT_FIELDS}


def dense_config(fields: dict) -> BertConfig:
    """A ``BertConfig`` of ``fields`` (a dense preset's, with the user's overrides), checked first."""
    fields = _without_single_experts(fields)
    check_dense_fields(BertConfig, fields)
    return BertConfig(**fields)


def dense_student_config(fields: dict, teacher_config: PretrainedConfig | None = None) -> PretrainedConfig:
    """The config of a dense student with ``fields`` (its shape and any field the user set) that learns from
    ``teacher_config``: the teacher's own config class when its layers are laid out as BERT's (else
    ``BertConfig``), with every architecture field of the teacher's (vocabulary, positions, token types, activation,
    padding id, ...) except those ``fields`` set."""
    if teacher_config is None:
        return dense_config(fields)
    fields = _without_single_experts(fields)
    model_type = getattr(teacher_config, "model_type", "")
    config_class = type(teacher_config) if model_type in BERT_LAYOUT_MODEL_TYPES else BertConfig
    if config_class is not BertConfig and not config_class.__module__.startswith("transformers"):
        config_class = type(AutoConfig.for_model(model_type))
    inherited = {
        key: value
        for key, value in teacher_config.to_dict().items()
        if key not in _CHECKPOINT_FIELDS and key in config_class().to_dict()
    }
    check_dense_fields(config_class, fields)
    return config_class(**{**inherited, **fields})
