"""Configuration of MoE-BERT, the 64-expert BERT of paper 003 (§2.2, appendix A), and its dense teacher.

The modular source of ``models/moe_bert/configuration_moe_bert.py`` (``python -m utils.hub_code``), whose class
compact-bert exports (its presets: ``presets.py``): the generator flattens ``SparseBertConfigBase`` into it, with these
defaults and this docstring, so that the file defines this one class.
"""

from __future__ import annotations

from .sparse_bert_base import SparseBertConfigBase

__all__ = ["MoEBertConfig"]


class MoEBertConfig(SparseBertConfigBase):
    """Vanilla post-LN BERT whose every FFN is a top-1 MoE of standard FFN experts (H → 4H → H, GELU).

    Defaults are the H=768 setting of paper 003: 12 layers, 12 heads, 64 experts, router ``softmax(W_r x + b_r)``
    (eq. 1), balance loss ``KL(uniform ‖ q)`` (eq. 4-5) with λ_B = 1000, no token dropping (FastMoE, used by the
    paper, has no capacity limit) and 128-token sequences. With ``num_experts=1`` it is the vanilla BERT teacher.
    """

    model_type = "moe_bert"

    def __init__(
        self,
        hidden_size: int = 768,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        intermediate_size: int = 3072,
        max_position_embeddings: int = 128,
        num_experts: int = 64,
        capacity_factor: float | None = None,
        router_aux_loss_type: str = "kl_uniform",
        router_aux_loss_coef: float = 1000.0,
        **kwargs,
    ):
        super().__init__(
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            max_position_embeddings=max_position_embeddings,
            num_experts=num_experts,
            capacity_factor=capacity_factor,
            router_aux_loss_type=router_aux_loss_type,
            router_aux_loss_coef=router_aux_loss_coef,
            **kwargs,
        )
