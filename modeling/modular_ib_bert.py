"""IB-BERT: the inverted-bottleneck BERT_LARGE teacher of MobileBERT (paper 001 §3.1, Table 1).

The modular source of ``models/ib_bert/modeling_ib_bert.py``: ``python -m utils.hub_code`` writes the architecture of
``modeling_bottleneck_bert.py`` out under the family's names, replacing each key of ``RENAMES`` by its value (the longest
first), as transformers' modular converter renames the classes a model inherits. Nothing imports this module at run
time: compact-bert runs the generated file.
"""

from __future__ import annotations

from ..configuration.modular_bottleneck_bert import IBBertConfig
from .modeling_bottleneck_bert import BottleneckBertModel

__all__ = ["ARCHITECTURE", "CONFIG_CLASS", "RENAMES"]

ARCHITECTURE = BottleneckBertModel
CONFIG_CLASS = IBBertConfig
RENAMES = {"BottleneckBertConfig": "IBBertConfig", "BottleneckBert": "IBBert", "bottleneck_bert": "ib_bert"}
