"""Configuration of MiniMoE, the mixture-of-minimal-experts student of paper 002 (§3.2, appendix B).

The modular source of ``models/minimoe/configuration_minimoe.py`` (``python -m utils.hub_code``), whose class
compact-bert exports; the presets stay here.
"""

from __future__ import annotations

from .sparse_bert_base import SparseBertConfigBase

__all__ = ["MiniMoEConfig", "MINIMOE_PRESETS"]


class MiniMoEConfig(SparseBertConfigBase):
    """A MiniLM-shaped BERT student whose FFN (optionally MHA) is a mixture of minimal top-1 experts.

    Defaults are MiniMoE 4L;384H with 1,4E (paper 002 notation ``x,yE``: x experts per MHA block, y per
    FFN block), Switch load balancing with α = 0.01 and a training capacity factor of 1.25. See
    ``SparseBertConfigBase`` for every field.
    """

    model_type = "minimoe"

    def __init__(self, **kwargs):
        # Defined on purpose: transformers 5 turns every config class into a dataclass and, for a subclass
        # without an ``__init__`` of its own, replaces the inherited one, so the base class's fields and
        # validation would never run.
        super().__init__(**kwargs)


def _student(layers: int, hidden: int, experts: int) -> dict:
    # MiniLM students keep a 32-d attention head and a 4x FFN, as the public MiniLM checkpoints do.
    return {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": hidden // 32,
        "intermediate_size": 4 * hidden,
        "num_experts": experts,
    }


# The students of paper 002 Table 3 with m = 4 experts, and each one's dense MiniLM (1,1E) counterpart.
MINIMOE_PRESETS = {}
for _layers, _hidden in ((6, 384), (4, 384), (3, 384), (4, 192), (3, 96)):
    MINIMOE_PRESETS[f"minimoe-{_layers}l-{_hidden}h"] = (MiniMoEConfig, _student(_layers, _hidden, 4))
    MINIMOE_PRESETS[f"minilm-{_layers}l-{_hidden}h"] = (MiniMoEConfig, _student(_layers, _hidden, 1))
# The default embedding student (`compact-bert distill embeddings`): 3 of all-MiniLM-L6-v2's 6 layers with the 1,024
# most important of each FFN's 1,536 neurons, which takes its latency from 0.50x to 0.41x the teacher's for 0.5 points
# of STS-B Spearman (docs/embeddings.md).
MINIMOE_PRESETS["minilm-3l-384h-ffn1024"] = (MiniMoEConfig, {**_student(3, 384, 1), "intermediate_size": 1024})
