"""Configuration of the bottleneck BERT family of the MobileBERT paper (paper 001, §3, Table 1).

One architecture serves the inverted-bottleneck teacher (IB-BERT) and the bottleneck students
(MobileBERT, MobileBERT_TINY); the two get their own config classes and ``model_type`` so that a
checkpoint says which role it was built for, and each validates the direction of its bottleneck.
This is the modular source of ``models/ib_bert/configuration_ib_bert.py`` and
``models/compact_mobilebert/configuration_compact_mobilebert.py`` (``python -m utils.hub_code``), whose classes
compact-bert exports; the presets stay here.

Field names follow transformers' ``MobileBertConfig`` so that checkpoints convert one to one; the one
structural field that transformers cannot express is ``attention_input`` (IB-BERT reads Q/K/V from the
512-d inter-block features and produces the 1024-d all-head size).
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
    require_positive_float,
    require_positive_int,
    require_token_id,
)

__all__ = ["BottleneckBertConfig", "CompactMobileBertConfig", "IBBertConfig"]

NORMALIZATION_TYPES = ("no_norm", "layer_norm")
# Where multi-head attention reads its query/key/value inputs (paper 001 Fig. 1 and appendix E):
#   shared_bottleneck: query and key from a second bottleneck of the inter-block features, value from the
#                      inter-block features themselves (MobileBERT, as transformers' MobileBertModel);
#   intra_bottleneck:  query, key and value from the intra-block features (MobileBERT_TINY, Fig. 4);
#   inter_block:       query, key and value from the inter-block features (IB-BERT teacher, Table 1).
ATTENTION_INPUTS = ("shared_bottleneck", "intra_bottleneck", "inter_block")


class BottleneckBertConfig(PretrainedConfig):
    """Shared fields and validation of IB-BERT and MobileBERT; use one of the two subclasses.

    Args:
        vocab_size: WordPiece vocabulary size.
        embedding_size: width of the token embedding table (128 in Table 1, the factorized embedding).
        hidden_size: inter-block feature-map size ``h_inter`` (512): what layers exchange and what
            feature-map transfer (eq. 2) compares.
        intra_bottleneck_size: intra-block size (128 for MobileBERT, 1024 for IB-BERT); also the all-head
            size of attention.
        num_hidden_layers, num_attention_heads, intermediate_size: as in BERT.
        num_feedforward_networks: stacked FFNs per layer (§3.2: 4 for MobileBERT).
        hidden_act: FFN activation (``relu`` is the operational optimization of §3.3).
        normalization_type: ``no_norm`` (eq. 1, ``γ∘h + β``) or ``layer_norm``.
        attention_input: see ``ATTENTION_INPUTS``.
        use_bottleneck: without it the layer is a plain post-LN BERT layer of width ``hidden_size``.
        trigram_input: the kernel-3 convolution embedding factorization of §3.4.
        classifier_activation: tanh pooler (as BERT) or the raw first-token features.
    """

    # The family's Auto classes and their class-name suffixes, named in ``auto_map`` (``auto_map.py``).
    # The bottleneck families also have the pre-training head of paper 001 (MLM + next-sentence prediction).
    auto_model_suffixes = {**ENCODER_AUTO_MODEL_SUFFIXES, "AutoModelForPreTraining": "ForPreTraining"}

    def __init__(
        self,
        vocab_size: int = 30522,
        embedding_size: int = 128,
        hidden_size: int = 512,
        num_hidden_layers: int = 24,
        num_attention_heads: int = 4,
        intra_bottleneck_size: int = 128,
        intermediate_size: int = 512,
        num_feedforward_networks: int = 4,
        hidden_act: str = "relu",
        normalization_type: str = "no_norm",
        attention_input: str = "shared_bottleneck",
        use_bottleneck: bool = True,
        trigram_input: bool = True,
        hidden_dropout_prob: float = 0.0,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        pad_token_id: int = 0,
        classifier_activation: bool = True,
        classifier_dropout: float | None = None,
        tie_word_embeddings: bool = True,
        **kwargs,
    ):
        reject_undefined_fields(type(self), kwargs)
        kwargs["auto_map"] = family_auto_map(type(self), self.auto_model_suffixes, kwargs.get("auto_map"))
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        # The masked-LM decoder shares the word embeddings, as in BERT; transformers 5 has no default for it.
        self.tie_word_embeddings = tie_word_embeddings
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intra_bottleneck_size = intra_bottleneck_size
        self.intermediate_size = intermediate_size
        self.num_feedforward_networks = num_feedforward_networks
        self.hidden_act = hidden_act
        self.normalization_type = normalization_type
        self.attention_input = attention_input
        self.use_bottleneck = use_bottleneck
        self.trigram_input = trigram_input
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.classifier_activation = classifier_activation
        self.classifier_dropout = classifier_dropout
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
    def true_hidden_size(self) -> int:
        """Width inside a layer: the intra-block size with bottlenecks, else the inter-block size."""
        return self.intra_bottleneck_size if self.use_bottleneck else self.hidden_size

    def _validate(self) -> None:
        owner = type(self).__name__
        for field in (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intra_bottleneck_size",
            "intermediate_size",
            "num_feedforward_networks",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            require_positive_int(owner, field, getattr(self, field))
        require_choice(owner, "hidden_act", self.hidden_act, ACT2FN.keys())
        require_choice(owner, "normalization_type", self.normalization_type, NORMALIZATION_TYPES)
        require_choice(owner, "attention_input", self.attention_input, ATTENTION_INPUTS)
        require_dropout_probability(owner, "hidden_dropout_prob", self.hidden_dropout_prob)
        require_dropout_probability(owner, "attention_probs_dropout_prob", self.attention_probs_dropout_prob)
        require_dropout_probability(owner, "classifier_dropout", self.classifier_dropout, allow_none=True)
        require_positive_float(owner, "initializer_range", self.initializer_range)
        require_positive_float(owner, "layer_norm_eps", self.layer_norm_eps)
        for field in (
            "use_bottleneck",
            "trigram_input",
            "classifier_activation",
            "tie_word_embeddings",
        ):
            require_bool(owner, field, getattr(self, field))
        require_token_id(owner, "pad_token_id", self.pad_token_id, self.vocab_size)
        field = "intra_bottleneck_size" if self.use_bottleneck else "hidden_size"
        require_divisible(owner, field, self.true_hidden_size, "num_attention_heads", self.num_attention_heads)
        if not self.use_bottleneck and self.attention_input != "inter_block":
            raise ValueError(
                f"{owner}: `attention_input` must be 'inter_block' when `use_bottleneck` is False (there is no "
                f"bottleneck to read from), got {self.attention_input!r}."
            )
        if self.use_bottleneck:
            self._validate_bottleneck_direction(owner)

    def _validate_bottleneck_direction(self, owner: str) -> None:
        """Subclasses say whether the intra-block may be wider (teacher) or narrower (student)."""


class IBBertConfig(BottleneckBertConfig):
    """IB-BERT: BERT_LARGE with inverted bottlenecks to a 512-d feature map; the MobileBERT teacher.

    Defaults are IB-BERT_LARGE of Table 1: inter 512, intra 1024, 4 heads, FFN 4096, 24 layers, LayerNorm
    and GELU, attention reading the inter-block features (293M parameters).
    """

    model_type = "ib_bert"

    def __init__(
        self,
        intra_bottleneck_size: int = 1024,
        intermediate_size: int = 4096,
        num_feedforward_networks: int = 1,
        hidden_act: str = "gelu",
        normalization_type: str = "layer_norm",
        attention_input: str = "inter_block",
        hidden_dropout_prob: float = 0.1,
        **kwargs,
    ):
        super().__init__(
            intra_bottleneck_size=intra_bottleneck_size,
            intermediate_size=intermediate_size,
            num_feedforward_networks=num_feedforward_networks,
            hidden_act=hidden_act,
            normalization_type=normalization_type,
            attention_input=attention_input,
            hidden_dropout_prob=hidden_dropout_prob,
            **kwargs,
        )

    def _validate_bottleneck_direction(self, owner: str) -> None:
        if self.intra_bottleneck_size < self.hidden_size:
            raise ValueError(
                f"{owner}: `intra_bottleneck_size` ({self.intra_bottleneck_size}) must be >= `hidden_size` "
                f"({self.hidden_size}): IB-BERT is the inverted-bottleneck teacher; use "
                "CompactMobileBertConfig for a bottleneck student."
            )


class CompactMobileBertConfig(BottleneckBertConfig):
    """MobileBERT student; defaults are MobileBERT of Table 1 (25.3M parameters), NoNorm + ReLU."""

    model_type = "compact_mobilebert"

    def __init__(self, **kwargs):
        # Defined on purpose: transformers 5 replaces an inherited ``__init__`` (see MiniMoEConfig).
        super().__init__(**kwargs)

    def _validate_bottleneck_direction(self, owner: str) -> None:
        if self.intra_bottleneck_size > self.hidden_size:
            raise ValueError(
                f"{owner}: `intra_bottleneck_size` ({self.intra_bottleneck_size}) must be <= `hidden_size` "
                f"({self.hidden_size}): MobileBERT is the bottleneck student; use IBBertConfig for an "
                "inverted-bottleneck teacher."
            )
