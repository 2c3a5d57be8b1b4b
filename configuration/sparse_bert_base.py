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
    reject_undefined_fields,
    require_bool,
    require_choice,
    require_divisible,
    require_dropout_probability,
    require_non_negative_float,
    require_positive_float,
    require_positive_int,
    require_token_id,
)

__all__ = ["SparseBertConfigBase", "ROUTER_TYPES", "ROUTER_AUX_LOSS_TYPES"]

# top1: learned softmax gate, the expert with the highest probability, output scaled by that probability.
# hash: a fixed random hash of the token id picks the expert (Roller et al., 2021); nothing to learn.
ROUTER_TYPES = ("top1", "hash")
# switch:     α · m · Σ_j f_j · P_j (Switch Transformers; paper 002 §3.2).
# kl_uniform: KL(uniform ‖ q), q the batch-mean router distribution (paper 003 eq. 4-5).
ROUTER_AUX_LOSS_TYPES = ("switch", "kl_uniform")


class SparseBertConfigBase(PretrainedConfig):
    """Post-LN BERT with optional top-1 mixture-of-experts FFN and MHA blocks.

    Args:
        num_experts: experts per FFN block (1 = the dense FFN of BERT).
        moe_intermediate_size: inner width of each FFN expert; ``None`` (default) = ``intermediate_size``, every
            expert a full-size FFN (paper 002's minimal experts, paper 003). Narrower experts are what MoEBERT's
            importance-guided split of a dense FFN produces (``distillation.teacher_init``): each token then runs
            ``moe_intermediate_size`` of the FFN's neurons, so a 4-expert block of width ``intermediate_size / 4``
            costs a quarter of the dense FFN per token.
        num_attention_experts: experts per MHA block (1 = dense MHA); the ``x`` of paper 002's ``x,yE``.
        router_type: ``top1`` or ``hash``; see ``ROUTER_TYPES``.
        capacity_factor: during training each expert takes at most ``ceil(capacity_factor · tokens /
            num_experts)`` tokens of a batch; the overflow is dropped and passes through the residual
            (paper 002 appendix B: 1.25). ``None`` drops nothing.
        eval_capacity_factor: the same at inference; ``None`` (default) drops nothing so that a token's
            output never depends on the other tokens of its batch.
        router_aux_loss_type: ``switch`` or ``kl_uniform``; see ``ROUTER_AUX_LOSS_TYPES``.
        router_aux_loss_coef: weight of the balance loss (the mean over MoE layers) in a head's loss.
        hash_seed: seed of the random token-id → expert table of hash routing.
        use_auxiliary_attention: append an auxiliary MHA block after the last layer, used only to align
            self-attention relations during distillation (paper 002 §3.2, after MiniLMv2).
        teacher_initialization: the record of how the weights were first copied from a pretrained teacher (layer
            map, kept channels, heads and neurons, how the experts were made), written by
            ``distillation.teacher_init``; ``None`` for a randomly initialized model. The model never reads it.
    """

    # What Trainer drops from a head's outputs when it collects predictions: the routing diagnostics sit
    # next to the logits, and without this a user's ``logits, labels = eval_pred`` receives a tuple.
    keys_to_ignore_at_inference = ["router_logits", "aux_loss", "expert_load", "dropped_token_fraction"]
    # The family's Auto classes and their class-name suffixes, named in ``auto_map`` (``auto_map.py``).
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
        reject_undefined_fields(type(self), kwargs)
        kwargs["auto_map"] = family_auto_map(type(self), self.auto_model_suffixes, kwargs.get("auto_map"))
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        # The masked-LM decoder shares the word embeddings, as in BERT; transformers 5 has no default for it.
        self.tie_word_embeddings = tie_word_embeddings
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.classifier_dropout = classifier_dropout
        self.num_experts = num_experts
        self.moe_intermediate_size = moe_intermediate_size
        self.num_attention_experts = num_attention_experts
        self.router_type = router_type
        self.capacity_factor = capacity_factor
        self.eval_capacity_factor = eval_capacity_factor
        self.router_aux_loss_type = router_aux_loss_type
        self.router_aux_loss_coef = router_aux_loss_coef
        self.hash_seed = hash_seed
        self.use_auxiliary_attention = use_auxiliary_attention
        self.teacher_initialization = teacher_initialization
        self._validate()

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """transformers builds the config from ``config.json`` and then sets each load keyword on it
        (``from_pretrained(folder, num_experts=-1)``), after ``__init__`` has validated: the result is validated
        again, so that a value arriving as a keyword is refused as the constructor refuses it."""
        built = super().from_dict(config_dict, **kwargs)
        (built[0] if isinstance(built, tuple) else built)._validate()
        return built

    @property
    def expert_intermediate_size(self) -> int:
        """The inner width of one FFN expert (``moe_intermediate_size``, else ``intermediate_size``)."""
        return self.intermediate_size if self.moe_intermediate_size is None else self.moe_intermediate_size

    @property
    def is_sparse(self) -> bool:
        return self.num_experts > 1 or self.num_attention_experts > 1

    def _validate(self) -> None:
        owner = type(self).__name__
        for field in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
            "num_experts",
            "num_attention_experts",
        ):
            require_positive_int(owner, field, getattr(self, field))
        if self.moe_intermediate_size is not None:
            require_positive_int(owner, "moe_intermediate_size", self.moe_intermediate_size)
        require_divisible(owner, "hidden_size", self.hidden_size, "num_attention_heads", self.num_attention_heads)
        require_choice(owner, "hidden_act", self.hidden_act, ACT2FN.keys())
        require_choice(owner, "router_type", self.router_type, ROUTER_TYPES)
        require_choice(owner, "router_aux_loss_type", self.router_aux_loss_type, ROUTER_AUX_LOSS_TYPES)
        require_dropout_probability(owner, "hidden_dropout_prob", self.hidden_dropout_prob)
        require_dropout_probability(owner, "attention_probs_dropout_prob", self.attention_probs_dropout_prob)
        require_dropout_probability(owner, "classifier_dropout", self.classifier_dropout, allow_none=True)
        require_positive_float(owner, "capacity_factor", self.capacity_factor, allow_none=True)
        require_positive_float(owner, "eval_capacity_factor", self.eval_capacity_factor, allow_none=True)
        require_positive_float(owner, "initializer_range", self.initializer_range)
        require_positive_float(owner, "layer_norm_eps", self.layer_norm_eps)
        require_non_negative_float(owner, "router_aux_loss_coef", self.router_aux_loss_coef)
        require_bool(owner, "use_auxiliary_attention", self.use_auxiliary_attention)
        require_bool(owner, "tie_word_embeddings", self.tie_word_embeddings)
        require_token_id(owner, "pad_token_id", self.pad_token_id, self.vocab_size)
        if self.teacher_initialization is not None and not isinstance(self.teacher_initialization, dict):
            raise ValueError(
                f"{owner}: `teacher_initialization` must be a dict or None, got {self.teacher_initialization!r}."
            )
        if isinstance(self.hash_seed, bool) or not isinstance(self.hash_seed, int) or self.hash_seed < 0:
            raise ValueError(f"{owner}: `hash_seed` must be an integer >= 0, got {self.hash_seed!r}.")
