"""Configuration of MiniMoE, the mixture-of-minimal-experts student of paper 002 (§3.2, appendix B).

The modular source of ``models/minimoe/configuration_minimoe.py`` (``python -m utils.hub_code``), whose class
compact-bert exports (its presets: ``presets.py``): the generator flattens ``SparseBertConfigBase`` into it, with these
defaults and this docstring, so that the file defines this one class.
"""

from __future__ import annotations

from .sparse_bert_base import SparseBertConfigBase

__all__ = ["MiniMoEConfig"]


class MiniMoEConfig(SparseBertConfigBase):
    """A MiniLM-shaped BERT student whose FFN (optionally MHA) is a mixture of minimal top-1 experts.

    Defaults are MiniMoE 4L;384H with 1,4E of paper 002, Switch load balancing with α = 0.01 and a training capacity
    factor of 1.25.
    """

    model_type = "minimoe"

    def __init__(self, **kwargs):
        # Defined on purpose: transformers 5 turns every config class into a dataclass and, for a subclass
        # without an ``__init__`` of its own, replaces the inherited one, so the base class's fields and
        # validation would never run.
        super().__init__(**kwargs)
