"""MobileBERT and MobileBERT_TINY: the compact students of paper 001 (§3.2-3.4, Table 1).

The modular source of ``models/compact_mobilebert/modeling_compact_mobilebert.py``: ``python -m utils.hub_code`` writes the architecture of
``modeling_bottleneck_bert.py`` out under the family's names, replacing each key of ``RENAMES`` by its value (the longest
first), as transformers' modular converter renames the classes a model inherits. Nothing imports this module at run
time: compact-bert runs the generated file.

The weight prefix is ``mobilebert``, transformers' own, so that MobileBERT checkpoints convert by renaming nothing
but the model type.
"""

from __future__ import annotations

from ..configuration.modular_bottleneck_bert import CompactMobileBertConfig
from .modeling_bottleneck_bert import BottleneckBertModel

__all__ = ["ARCHITECTURE", "CONFIG_CLASS", "RENAMES"]

ARCHITECTURE = BottleneckBertModel
CONFIG_CLASS = CompactMobileBertConfig
RENAMES = {
    "BottleneckBertConfig": "CompactMobileBertConfig",
    "BottleneckBert": "CompactMobileBert",
    "bottleneck_bert": "mobilebert",
}
