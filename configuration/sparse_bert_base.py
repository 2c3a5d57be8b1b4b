"""Fields and validation shared by the two post-LN BERT families with mixture-of-experts layers.

MiniMoE (paper 002) and MoE-BERT (paper 003) are the same architecture — a post-LN BERT whose FFN, and
optionally MHA, is a top-1 mixture of experts — trained for different purposes. They share one MoE layer
(DESIGN.md §2.4) and therefore one set of routing fields; each family's config only changes defaults.
"""

from __future__ import annotations

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from .auto_map import ENCODER_AUTO_MODEL_SUFFIXES, family_auto_map
from .validation import (
    BOOLEAN,
    DICT,
    NON_NEGATIVE_INT,
    NON_NEGATIVE_NUMBER,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    PROBABILITY,
    multiple_of,
    one_of,
    reject_undefined_fields,
    require,
    token_id,
)

__all__ = ["SparseBertConfigBase"]


class SparseBertConfigBase(PretrainedConfig):
    """Post-LN BERT with optional top-1 mixture-of-experts FFN and MHA blocks.

    Args:
        num_experts, num_attention_experts: experts per FFN and per MHA block (1: BERT's dense block); paper 002's
            ``x,yE`` is ``num_attention_experts=x, num_experts=y``.
        moe_intermediate_size: inner width of an FFN expert; ``None``: ``intermediate_size``, full-size experts
            (papers 002 and 003). Narrower experts come from MoEBERT's importance-guided split of a dense FFN
            (``distillation.teacher_init``): 4 experts of width ``intermediate_size / 4`` cost a quarter of its FLOPs.
        router_type: ``top1``, a learned softmax gate whose highest-probability expert's output is scaled by that
            probability, or ``hash``, a fixed random hash of the token id, nothing to learn (Roller et al., 2021).
        router_aux_loss_type: ``switch``, α · m · Σ_j f_j · P_j (Switch Transformers; paper 002 §3.2), or
            ``kl_uniform``, KL(uniform ‖ q) with q the batch-mean router distribution (paper 003 eq. 4-5).
        capacity_factor: in training an expert takes at most ``ceil(capacity_factor · tokens / num_experts)`` tokens
            of a batch, the overflow passing through the residual (paper 002 appendix B: 1.25; ``None``: no limit).
        eval_capacity_factor: the same at inference, ``None`` so that no token's output depends on its batch.
        router_aux_loss_coef: weight of the balance loss (the mean over MoE layers) in a head's loss.
        hash_seed: seed of hash routing's random token-id → expert table.
        use_auxiliary_attention: an auxiliary MHA block after the last layer, only to align self-attention relations
            in distillation (paper 002 §3.2, after MiniLMv2).
        teacher_initialization: how the weights were copied from a pretrained teacher (layer map, kept channels,
            heads, neurons, how experts were made; ``distillation.teacher_init``), ``None`` if random. Never read.
    """

    # What Trainer drops from a head's outputs to collect predictions, else ``eval_pred`` holds routing diagnostics.
    keys_to_ignore_at_inference = ["router_logits", "aux_loss", "expert_load", "dropped_token_fraction"]
    auto_model_suffixes = ENCODER_AUTO_MODEL_SUFFIXES

    def __init__(
        self,
        vocab_size: int = 30522,
        hidden_size: int = 384,
        num_hidden_layers: int = 4,
        num_attention_heads: int = 12,
        intermediate_size: int = 1536,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        pad_token_id: int = 0,
        classifier_dropout: float | None = None,
        num_experts: int = 4,
        moe_intermediate_size: int | None = None,
        num_attention_experts: int = 1,
        router_type: str = "top1",
        capacity_factor: float | None = 1.25,
        eval_capacity_factor: float | None = None,
        router_aux_loss_type: str = "switch",
        router_aux_loss_coef: float = 0.01,
        hash_seed: int = 0,
        use_auxiliary_attention: bool = False,
        teacher_initialization: dict | None = None,
        tie_word_embeddings: bool = True,
        **kwargs,
    ):
        # Every argument is a field, stored as given once transformers has set up its own (and validated then).
        fields = {name: value for name, value in locals().items() if name not in ("self", "kwargs", "__class__")}
        auto_map = family_auto_map(type(self), self.auto_model_suffixes, kwargs.pop("auto_map", None))
        reject_undefined_fields(self, fields, kwargs)
        super().__init__(auto_map=auto_map, **kwargs)
        vars(self).update(fields)
        self._validate()

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """Load keywords (``from_pretrained(folder, num_experts=-1)``) are set after ``__init__``: checked here too."""
        built = super().from_dict(config_dict, **kwargs)
        (built[0] if isinstance(built, tuple) else built)._validate()
        return built

    @property
    def expert_intermediate_size(self) -> int:
        return self.intermediate_size if self.moe_intermediate_size is None else self.moe_intermediate_size

    @property
    def is_sparse(self) -> bool:
        return self.num_experts > 1 or self.num_attention_experts > 1

    def _validate(self) -> None:
        require(self, POSITIVE_INT, "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
        require(self, POSITIVE_INT, "intermediate_size", "max_position_embeddings", "type_vocab_size")
        require(self, POSITIVE_INT, "num_experts", "num_attention_experts")
        require(self, POSITIVE_INT, "moe_intermediate_size", or_none=True)
        require(self, multiple_of("num_attention_heads", self.num_attention_heads), "hidden_size")
        require(self, one_of(ACT2FN), "hidden_act")
        require(self, one_of(("top1", "hash")), "router_type")
        require(self, one_of(("switch", "kl_uniform")), "router_aux_loss_type")
        require(self, PROBABILITY, "hidden_dropout_prob", "attention_probs_dropout_prob")
        require(self, PROBABILITY, "classifier_dropout", or_none=True)
        require(self, POSITIVE_NUMBER, "capacity_factor", "eval_capacity_factor", or_none=True)
        require(self, POSITIVE_NUMBER, "initializer_range", "layer_norm_eps")
        require(self, NON_NEGATIVE_NUMBER, "router_aux_loss_coef")
        require(self, BOOLEAN, "use_auxiliary_attention", "tie_word_embeddings")
        require(self, token_id(self.vocab_size), "pad_token_id", or_none=True)
        require(self, DICT, "teacher_initialization", or_none=True)
        require(self, NON_NEGATIVE_INT, "hash_seed")
