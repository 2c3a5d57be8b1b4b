"""MoE-BERT: 64-expert top-1 FFNs pre-trained with transfer-capability distillation (paper 003).

The modular source of ``models/moe_bert/modeling_moe_bert.py``: ``python -m utils.hub_code`` writes the architecture of
``modeling_sparse_bert.py`` out under the family's names, replacing each key of ``RENAMES`` by its value (the longest
first), as transformers' modular converter renames the classes a model inherits. Nothing imports this module at run
time: compact-bert runs the generated file.
"""

from __future__ import annotations

from ..configuration.modular_moe_bert import MoEBertConfig
from .modeling_sparse_bert import SparseBertModel

__all__ = ["ARCHITECTURE", "CONFIG_CLASS", "RENAMES"]

ARCHITECTURE = SparseBertModel
CONFIG_CLASS = MoEBertConfig
RENAMES = {"SparseBertConfigBase": "MoEBertConfig", "SparseBert": "MoEBert", "sparse_bert": "moe_bert"}
