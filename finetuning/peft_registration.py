"""PEFT's default targets for compact-bert's model types, registered without importing PEFT.

PEFT picks the modules to adapt, when a config names none, from tables keyed by ``config.model_type``
(``peft.utils.constants.TRANSFORMERS_MODELS_TO_<METHOD>_TARGET_MODULES_MAPPING``, plus IA³'s
``..._IA3_FEEDFORWARD_MODULES_MAPPING``); a model type missing there fails with "Please specify
`target_modules`". Our models keep BERT's submodule names (``attention.self.query``, ``key``, ``value``,
``attention.output.dense``, ``intermediate.dense``, ``output.dense``), so every method's entry for ``bert`` is
right for them too: LoRA gets ``query``/``value``, IA³ ``key``/``value``/``output.dense`` with ``output.dense``
as its feed-forward module. No table names a router, so defaults never adapt one.

Importing PEFT costs seconds, so ``import compact_bert`` does not: it registers right away when PEFT is
already imported, and otherwise installs a one-shot import hook that registers the moment
``peft.utils.constants`` is first executed (whichever of the two is imported first).

Limits: the tables hold module names only. MoE experts are ``nn.Parameter`` stacks, reached through
``target_parameters``, which no PEFT table provides; ``finetuning.peft_support.build_peft_config`` adds them.
A config with MoE attention (``num_attention_experts > 1``) has expert stacks (``ExpertLinear``) in
``query``/``value``, which PEFT's module wrappers reject: use ``build_peft_config`` there. A process that loads
our models as Hub remote code without compact-bert installed has no registration at all (remote code must not
import PEFT): pass ``target_modules`` (e.g. ``["query", "value"]``), or install compact-bert and call
``register_peft_default_targets()``.
"""

from __future__ import annotations

from types import ModuleType

from ..import_hooks import after_import

__all__ = ["COMPACT_BERT_MODEL_TYPES", "register_peft_default_targets"]

COMPACT_BERT_MODEL_TYPES = ("ib_bert", "compact_mobilebert", "minimoe", "moe_bert")

_PEFT_CONSTANTS = "peft.utils.constants"


def _register_into(constants: ModuleType) -> list[str]:
    """Give our model types the ``bert`` entry of every PEFT target table that has one; returns the tables."""
    registered = []
    for name, table in vars(constants).items():
        is_target_table = name.startswith("TRANSFORMERS_MODELS_TO_") and name.endswith("_MODULES_MAPPING")
        if not (is_target_table and isinstance(table, dict) and "bert" in table):
            continue
        for model_type in COMPACT_BERT_MODEL_TYPES:
            entry = table["bert"]
            table.setdefault(model_type, list(entry) if isinstance(entry, (list, tuple, set)) else entry)
        registered.append(name)
    return registered


def register_peft_default_targets() -> list[str]:
    """Register our model types' default targets with PEFT (importing it); returns the names of the tables.

    Idempotent, and an entry someone already set for one of our model types is kept. Call it when PEFT must
    know our types before ``import compact_bert`` could have registered them, e.g. in tooling that imported a
    copy of the tables.
    """
    from peft.utils import constants

    return _register_into(constants)


def register_when_peft_is_imported() -> None:
    """What ``import compact_bert`` runs: register now if PEFT is loaded, else as soon as it is."""
    after_import(_PEFT_CONSTANTS, _register_into)
