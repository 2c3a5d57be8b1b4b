"""The ``auto_map`` every compact-bert config carries from its creation: all of its family's classes.

transformers saves the code of a class registered with ``register_for_auto_class`` next to the weights and adds
that one class to ``config.auto_map`` (``dynamic_module_utils.custom_object_save``), keeping the entries the config
already has. A folder saved from a masked-LM model would otherwise load only as a masked-LM model through
``trust_remote_code``, while the family's ``modeling_<model_type>.py`` holds every head: pre-training saves an MLM
model and fine-tuning loads it for classification. So the config names every head of its family from the start.
"""

from __future__ import annotations

__all__ = ["ENCODER_AUTO_MODEL_SUFFIXES", "family_auto_map"]

# The Auto classes every family has, each with the suffix of its class name (``MiniMoE`` + ``ForMaskedLM``).
ENCODER_AUTO_MODEL_SUFFIXES = {
    f"AutoModel{head}": head or "Model"
    for head in ("", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
}


def family_auto_map(config_class: type, model_suffixes: dict[str, str], given: dict | None = None) -> dict[str, str]:
    """``auto_map`` of ``<Family>Config``: it, and ``modeling_<model_type>.<Family><suffix>`` for each Auto class."""
    family, model_type = config_class.__name__.removesuffix("Config"), config_class.model_type
    models = {auto: f"modeling_{model_type}.{family}{suffix}" for auto, suffix in model_suffixes.items()}
    return {"AutoConfig": f"configuration_{model_type}.{config_class.__name__}", **models, **(given or {})}
