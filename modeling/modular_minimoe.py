"""MiniMoE: a MiniLM-shaped student with mixtures of minimal top-1 experts (paper 002 §3.2).

The modular source of ``models/minimoe/modeling_minimoe.py``: ``python -m utils.hub_code`` writes the architecture of
``modeling_sparse_bert.py`` out under the family's names, replacing each key of ``RENAMES`` by its value (the longest
first), as transformers' modular converter renames the classes a model inherits. Nothing imports this module at run
time: compact-bert runs the generated file.
"""

from __future__ import annotations

from ..configuration.modular_minimoe import MiniMoEConfig
from .modeling_sparse_bert import SparseBertModel

__all__ = ["ARCHITECTURE", "CONFIG_CLASS", "RENAMES"]

ARCHITECTURE = SparseBertModel
CONFIG_CLASS = MiniMoEConfig
RENAMES = {"SparseBertConfigBase": "MiniMoEConfig", "SparseBert": "MiniMoE", "sparse_bert": "minimoe"}
