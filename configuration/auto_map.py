"""The ``auto_map`` every compact-bert config carries from its creation: all of its family's classes.

transformers saves the code of a class registered with ``register_for_auto_class`` next to the weights and adds
that one class to ``config.auto_map`` (``dynamic_module_utils.custom_object_save``), keeping the entries the config
already has. A folder saved from a masked-LM model would otherwise load only as a masked-LM model through
``trust_remote_code``, while the family's ``modeling_<model_type>.py`` holds every head: pre-training saves an MLM
model and fine-tuning loads it for classification. So the config names every head of its family from the start.
"""

from __future__ import annotations

__all__ = ["ENCODER_AUTO_MODEL_SUFFIXES", "family_auto_map"]

# The Auto classes every family has and the suffix of each one's class name (``MiniMoE`` + ``ForMaskedLM``).
ENCODER_AUTO_MODEL_SUFFIXES = {
    "AutoModel": "Model",
    "AutoModelForMaskedLM": "ForMaskedLM",
    "AutoModelForSequenceClassification": "ForSequenceClassification",
    "AutoModelForTokenClassification": "ForTokenClassification",
    "AutoModelForQuestionAnswering": "ForQuestionAnswering",
}


def family_auto_map(config_class: type, model_suffixes: dict[str, str], given: dict | None = None) -> dict[str, str]:
    """``auto_map`` of the family of ``config_class`` (named ``<Family>Config``): ``AutoConfig`` → its
    ``configuration_<model_type>`` module, each Auto class of ``model_suffixes`` (Auto class → class-name suffix,
    ``{"AutoModel": "Model", ...}``) → ``modeling_<model_type>.<Family><suffix>``; the entries of ``given`` (the
    ``auto_map`` of a loaded ``config.json``) take precedence."""
    family = config_class.__name__.removesuffix("Config")
    model_type = config_class.model_type
    auto_map = {"AutoConfig": f"configuration_{model_type}.{config_class.__name__}"}
    for auto_name, suffix in model_suffixes.items():
        auto_map[auto_name] = f"modeling_{model_type}.{family}{suffix}"
    return {**auto_map, **(given or {})}
