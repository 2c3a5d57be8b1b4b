"""Field checks shared by every compact-bert config.

Each check raises a ``ValueError`` that names the config class, the field, the bad value and what would
be valid, so that a wrong config fails when it is built rather than as a shape error deep in ``forward``.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Iterable
from typing import Any

__all__ = [
    "TRANSFORMERS_CONFIG_KEYS",
    "reject_undefined_fields",
    "require_bool",
    "require_choice",
    "require_divisible",
    "require_dropout_probability",
    "require_non_negative_float",
    "require_positive_float",
    "require_positive_int",
    "require_token_id",
]


def _fail(owner: str, field: str, value: Any, allowed: str) -> None:
    raise ValueError(f"{owner}: `{field}` must be {allowed}, got {value!r}.")


def require_positive_int(owner: str, field: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _fail(owner, field, value, f"an integer >= {minimum}")


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def require_bool(owner: str, field: str, value: Any) -> None:
    """A real boolean: the string "false" is truthy, and would silently switch the feature on."""
    if not isinstance(value, bool):
        _fail(owner, field, value, "True or False")


def require_positive_float(owner: str, field: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not _is_number(value) or not value > 0:
        _fail(owner, field, value, "a finite number > 0" + (" or None" if allow_none else ""))


def require_non_negative_float(owner: str, field: str, value: Any) -> None:
    if not _is_number(value) or value < 0:
        _fail(owner, field, value, "a finite number >= 0")


def require_token_id(owner: str, field: str, value: Any, vocab_size: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab_size:
        _fail(owner, field, value, f"None or a token id in [0, vocab_size) = [0, {vocab_size})")


def require_dropout_probability(owner: str, field: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not _is_number(value) or not 0.0 <= value < 1.0:
        _fail(owner, field, value, "a probability in [0, 1)" + (" or None" if allow_none else ""))


def require_choice(owner: str, field: str, value: Any, choices: Iterable[str]) -> None:
    choices = sorted(choices)
    if value not in choices:
        _fail(owner, field, value, "one of " + ", ".join(repr(choice) for choice in choices))


def require_divisible(owner: str, field: str, value: int, divisor_field: str, divisor: int) -> None:
    if value % divisor != 0:
        _fail(owner, field, value, f"divisible by `{divisor_field}` ({divisor})")


# The keys transformers itself puts in a config (``PretrainedConfig``'s arguments and saved fields on 4.57 and 5.x, and
# what older lines wrote): a saved ``config.json`` carries them whichever line wrote it, so they are never refused.
TRANSFORMERS_CONFIG_KEYS = frozenset(
    {
        "add_cross_attention", "architectures", "attn_implementation", "auto_map", "bad_words_ids",
        "begin_suppress_tokens", "bos_token_id", "chunk_size_feed_forward", "cross_attention_hidden_size",
        "decoder_start_token_id", "diversity_penalty", "do_sample", "dtype", "early_stopping",
        "encoder_no_repeat_ngram_size", "eos_token_id", "experts_implementation", "exponential_decay_length_penalty",
        "finetuning_task", "forced_bos_token_id", "forced_eos_token_id", "gradient_checkpointing", "id2label",
        "is_decoder", "is_encoder_decoder", "label2id", "length_penalty", "max_length", "min_length", "model_type",
        "name_or_path",
        "no_repeat_ngram_size", "num_beam_groups", "num_beams", "num_labels", "num_return_sequences",
        "output_attentions", "output_hidden_states", "output_scores", "pad_token_id", "prefix", "problem_type",
        "pruned_heads", "quantization_config", "remove_invalid_values", "repetition_penalty", "return_dict",
        "return_dict_in_generate", "sep_token_id", "suppress_tokens", "task_specific_params", "temperature",
        "tf_legacy_loss", "tie_encoder_decoder", "tie_word_embeddings", "tokenizer_class", "top_k", "top_p",
        "torch_dtype", "torchscript", "transformers_version", "typical_p", "use_bfloat16", "use_cache",
    }
)  # fmt: skip


def _own_fields(config_class: type) -> set[str]:
    """The arguments of the ``__init__`` of every class of ``config_class`` that is not transformers' own."""
    own = set()
    for klass in config_class.__mro__:
        if klass.__module__.startswith("transformers") or klass is object:
            continue
        if "__init__" in vars(klass):
            own |= set(inspect.signature(vars(klass)["__init__"]).parameters) - {"self", "kwargs"}
    return own


def reject_undefined_fields(config_class: type, given: Iterable[str]) -> None:
    """Refuse a field that neither ``config_class`` nor transformers defines, in a saved ``config.json`` as in a
    config built in code: transformers would store it and every model would ignore it (``num_layers: 7`` builds the
    default depth; a misspelt ``num_expert`` trains 4 experts instead of 8). The message names the field and the
    real one it most likely means. Keys transformers writes (``TRANSFORMERS_CONFIG_KEYS``, this line's
    ``PretrainedConfig`` arguments) and private ``_keys`` pass."""
    from transformers import PretrainedConfig

    own = _own_fields(config_class)
    line = set(inspect.signature(PretrainedConfig.__init__).parameters)
    for name in given:
        if name in own or name in TRANSFORMERS_CONFIG_KEYS or name in line or name.startswith("_"):
            continue
        if name in TRANSFORMERS_ALIASES:
            hint = TRANSFORMERS_ALIASES[name] + "."
        else:
            close = difflib.get_close_matches(name, sorted(own), n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`?" if close else f"its fields: {', '.join(sorted(own))}."
        raise ValueError(
            f"{config_class.__name__}: unknown field `{name}` (in config.json or the config's arguments); {hint} "
            "Remove or rename it: an unknown field would be stored and ignored."
        )


# transformers' names (Mixtral, Qwen-MoE, DeepSeek, BERT variants) for what compact-bert configs call otherwise, or
# for settings compact-bert fixes: given as overrides they would be stored and ignored.
_ONE_EXPERT_PER_TOKEN = (
    "compact-bert's MoE layers route each token to exactly one expert (top-1 routing, MiniMoE "
    "and MoE-BERT alike), so there is no number of experts per token to set"
)
TRANSFORMERS_ALIASES = {
    "num_layers": "compact-bert calls it `num_hidden_layers`",
    "n_layers": "compact-bert calls it `num_hidden_layers`",
    "num_heads": "compact-bert calls it `num_attention_heads`",
    "n_heads": "compact-bert calls it `num_attention_heads`",
    "d_model": "compact-bert calls it `hidden_size`",
    "hidden_dim": "compact-bert calls it `hidden_size`",
    "ffn_dim": "compact-bert calls it `intermediate_size`",
    "num_local_experts": "compact-bert calls it `num_experts`",
    "n_routed_experts": "compact-bert calls it `num_experts`",
    "num_experts_per_tok": _ONE_EXPERT_PER_TOKEN,
    "num_selected_experts": _ONE_EXPERT_PER_TOKEN,
    "moe_top_k": _ONE_EXPERT_PER_TOKEN,
    "top_k": _ONE_EXPERT_PER_TOKEN,
}


def reject_unknown_fields(config_class: type, given: Iterable[str]) -> None:
    """Refuse any name ``config_class`` does not define — for fields a user sets (preset overrides), where an
    unknown name can only be a mistake. transformers' names for fields we call otherwise get the field's real
    name (``num_layers`` → ``num_hidden_layers``), others the closest real field where there is one.

    Saved ``config.json`` files and configs built in code go through ``reject_undefined_fields``, which lets the keys
    transformers writes pass."""
    known = set(config_class().to_dict())
    for klass in config_class.__mro__:
        if "__init__" in vars(klass) and klass is not object:
            known |= set(inspect.signature(vars(klass)["__init__"]).parameters) - {"self", "kwargs", "args"}
    for name in given:
        if name in known or isinstance(getattr(config_class, name, None), property):  # e.g. `num_labels`
            continue
        if name in TRANSFORMERS_ALIASES:
            hint = TRANSFORMERS_ALIASES[name]
        else:
            close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
            hint = (
                f"did you mean {' or '.join(f'`{match}`' for match in close)}?"
                if close
                else (f"its fields: {', '.join(sorted(field for field in known if not field.startswith('_')))}")
            )
        raise ValueError(f"{config_class.__name__} has no field `{name}`: {hint}")
