"""Field checks shared by every compact-bert config.

Each check raises a ``ValueError`` that names the config class, the field, the bad value and what would be valid, so
that a wrong config fails when it is built rather than as a shape error deep in ``forward``. The generator copies what
a config class uses of this module into the class's generated file; ``reject_unknown_fields`` serves preset overrides.
"""

from __future__ import annotations

import difflib
import inspect
import math

from transformers import PretrainedConfig

__all__ = [
    "BOOLEAN",
    "DICT",
    "NON_NEGATIVE_INT",
    "NON_NEGATIVE_NUMBER",
    "OTHER_LINE_KEYS",
    "POSITIVE_INT",
    "POSITIVE_NUMBER",
    "PROBABILITY",
    "TRANSFORMERS_ALIASES",
    "multiple_of",
    "one_of",
    "reject_undefined_fields",
    "reject_unknown_fields",
    "require",
    "token_id",
]


# Rules: what a field may hold, as a test of its value and what the error message says the value must be. A number is
# a finite int or float (``True`` is an int to Python; ``inf`` sizes nothing); a flag is a real boolean (the string
# "false" is truthy, and would silently switch the feature on).
_is_number = lambda value: isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
POSITIVE_INT = (lambda value: _is_number(value) and isinstance(value, int) and value >= 1, "an integer >= 1")
NON_NEGATIVE_INT = (lambda value: _is_number(value) and isinstance(value, int) and value >= 0, "an integer >= 0")
POSITIVE_NUMBER = (lambda value: _is_number(value) and value > 0, "a finite number > 0")
NON_NEGATIVE_NUMBER = (lambda value: _is_number(value) and value >= 0, "a finite number >= 0")
PROBABILITY = (lambda value: _is_number(value) and 0 <= value < 1, "a probability in [0, 1)")
BOOLEAN = (lambda value: isinstance(value, bool), "True or False")
DICT = (lambda value: isinstance(value, dict), "a dict")
# Rules that depend on the config: one of some names, a multiple of another field, a token id of the vocabulary.
one_of = lambda names: (lambda value: value in sorted(names), "one of " + ", ".join(map(repr, sorted(names))))
multiple_of = lambda field, divisor: (lambda value: value % divisor == 0, f"divisible by `{field}` ({divisor})")
token_id = lambda size: (lambda value: NON_NEGATIVE_INT[0](value) and value < size, f"a token id in [0, {size})")


def require(config, rule: tuple, *fields: str, or_none: bool = False) -> None:
    """Refuse the first of ``config``'s ``fields`` that fails ``rule`` (``None`` passes when ``or_none``)."""
    for field in fields:
        if not (rule[0](value := getattr(config, field)) or (or_none and value is None)):
            allowed = rule[1] + (" or None" if or_none else "")
            raise ValueError(f"{type(config).__name__}: `{field}` must be {allowed}, got {value!r}.")


# transformers' names (Mixtral, Qwen-MoE, DeepSeek, BERT variants) for what compact-bert calls otherwise, or for a
# setting compact-bert fixes: given as fields they would be stored and ignored.
TRANSFORMERS_ALIASES = {
    **dict.fromkeys(("num_layers", "n_layers"), "compact-bert calls it `num_hidden_layers`."),
    **dict.fromkeys(("num_heads", "n_heads"), "compact-bert calls it `num_attention_heads`."),
    **dict.fromkeys(("d_model", "hidden_dim"), "compact-bert calls it `hidden_size`."),
    **dict.fromkeys(("ffn_dim",), "compact-bert calls it `intermediate_size`."),
    **dict.fromkeys(("num_local_experts", "n_routed_experts"), "compact-bert calls it `num_experts`."),
    **dict.fromkeys(
        ("num_experts_per_tok", "num_selected_experts", "moe_top_k", "top_k"),
        "compact-bert's MoE layers route each token to exactly one expert: there are no experts per token to set.",
    ),
}
# Keys transformers writes that this line's PretrainedConfig cannot name: 4.57's arguments that 5.x dropped, and what
# transformers sets on a built config (`use_cache`: 5.x's Trainer; `quantization_config`: quantizers of both lines).
OTHER_LINE_KEYS = frozenset({
    "add_cross_attention", "bos_token_id", "cross_attention_hidden_size", "decoder_start_token_id", "eos_token_id",
    "finetuning_task", "is_decoder", "prefix", "pruned_heads", "sep_token_id", "task_specific_params",
    "tf_legacy_loss", "tie_encoder_decoder", "tokenizer_class", "torchscript", "use_bfloat16", "use_cache",
    "quantization_config"
})  # fmt: skip


def reject_undefined_fields(config, fields, given: dict) -> None:
    """Refuse a key of ``given`` neither in ``config``'s ``fields`` nor transformers': it would be stored and ignored
    (``num_expert: 8`` trains 4 experts). transformers' are ``OTHER_LINE_KEYS`` and what this line's
    ``PretrainedConfig`` has (``num_labels``) or its ``__init__`` consumes (``torch_dtype``); ``_private`` keys pass."""
    for name, value in given.items():
        if name in fields or name.startswith("_") or name in OTHER_LINE_KEYS or name in vars(PretrainedConfig()):
            continue
        attribute = getattr(PretrainedConfig, name, None)  # a class attribute or property, not a method
        if (attribute is not None and not callable(attribute)) or name not in vars(PretrainedConfig(**{name: value})):
            continue
        close = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`?" if close else f"its fields: {', '.join(sorted(fields))}."
        raise ValueError(
            f"{type(config).__name__}: unknown field `{name}` (in config.json or the config's arguments); "
            f"{TRANSFORMERS_ALIASES.get(name, hint)} Remove or rename it: an unknown field is stored and ignored."
        )


def reject_unknown_fields(config_class: type, given) -> None:
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
