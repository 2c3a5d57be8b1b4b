"""Configuration of the bottleneck BERT family of the MobileBERT paper (paper 001, §3, Table 1).

One architecture serves the inverted-bottleneck teacher (IB-BERT) and the bottleneck students
(MobileBERT, MobileBERT_TINY); the two get their own config classes and ``model_type`` so that a
checkpoint says which role it was built for, and each validates the direction of its bottleneck.
This is the modular source of ``models/ib_bert/configuration_ib_bert.py`` and
``models/compact_mobilebert/configuration_compact_mobilebert.py`` (``python -m utils.hub_code``), whose classes
compact-bert exports (their presets: ``presets.py``): the generator flattens ``BottleneckBertConfig`` into each, with
its defaults and docstring, so that each file defines one class.

Field names follow transformers' ``MobileBertConfig`` so that checkpoints convert one to one; the one
structural field that transformers cannot express is ``attention_input`` (IB-BERT reads Q/K/V from the
512-d inter-block features and produces the 1024-d all-head size).
"""

from __future__ import annotations

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from .auto_map import ENCODER_AUTO_MODEL_SUFFIXES, family_auto_map
from .validation import (
    BOOLEAN,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    PROBABILITY,
    multiple_of,
    one_of,
    reject_undefined_fields,
    require,
    token_id,
)

__all__ = ["BottleneckBertConfig", "CompactMobileBertConfig", "IBBertConfig"]


class BottleneckBertConfig(PretrainedConfig):
    """Shared fields and validation of IB-BERT and MobileBERT; use one of the two subclasses.

    Args:
        vocab_size, num_hidden_layers, num_attention_heads, intermediate_size: as in BERT.
        embedding_size: width of the token embedding table (128 in Table 1, the factorized embedding).
        hidden_size: inter-block feature-map size ``h_inter`` (512), what layers exchange and what feature-map
            transfer (eq. 2) compares.
        intra_bottleneck_size: intra-block size, also the all-head size of attention (128 for MobileBERT, 1024 for
            IB-BERT).
        num_feedforward_networks: stacked FFNs per layer (§3.2: 4 for MobileBERT).
        hidden_act: FFN activation (``relu`` is the operational optimization of §3.3).
        normalization_type: ``no_norm`` (eq. 1, ``γ∘h + β``) or ``layer_norm``.
        attention_input: where attention reads its query, key and value (paper 001 Fig. 1 and appendix E):
            ``shared_bottleneck``, query and key from a second bottleneck of the inter-block features, value from those
            (MobileBERT, as transformers' MobileBertModel); ``intra_bottleneck``, all three from the intra-block
            features (MobileBERT_TINY, Fig. 4); ``inter_block``, all three from the inter-block features (IB-BERT).
        use_bottleneck: without it the layer is a plain post-LN BERT layer of width ``hidden_size``.
        trigram_input: the kernel-3 convolution embedding factorization of §3.4.
        classifier_activation: tanh pooler (as BERT) or the raw first-token features.
    """

    # The Auto classes named in ``auto_map``: an encoder's, and paper 001's pre-training head (MLM + next sentence).
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
    def true_hidden_size(self) -> int:
        """Width inside a layer: the intra-block size with bottlenecks, else the inter-block size."""
        return self.intra_bottleneck_size if self.use_bottleneck else self.hidden_size

    def _validate(self) -> None:
        require(self, POSITIVE_INT, "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers")
        require(self, POSITIVE_INT, "num_attention_heads", "intra_bottleneck_size", "intermediate_size")
        require(self, POSITIVE_INT, "num_feedforward_networks", "max_position_embeddings", "type_vocab_size")
        require(self, one_of(ACT2FN), "hidden_act")
        require(self, one_of(("no_norm", "layer_norm")), "normalization_type")
        require(self, one_of(("shared_bottleneck", "intra_bottleneck", "inter_block")), "attention_input")
        require(self, PROBABILITY, "hidden_dropout_prob", "attention_probs_dropout_prob")
        require(self, PROBABILITY, "classifier_dropout", or_none=True)
        require(self, POSITIVE_NUMBER, "initializer_range", "layer_norm_eps")
        require(self, BOOLEAN, "use_bottleneck", "trigram_input", "classifier_activation", "tie_word_embeddings")
        require(self, token_id(self.vocab_size), "pad_token_id", or_none=True)
        heads = multiple_of("num_attention_heads", self.num_attention_heads)
        require(self, heads, "intra_bottleneck_size" if self.use_bottleneck else "hidden_size")
        if self.use_bottleneck:
            self._validate_bottleneck_direction(type(self).__name__)
        else:  # attention has no bottleneck to read from
            inter_block = (lambda value: value == "inter_block", "'inter_block' when `use_bottleneck` is False")
            require(self, inter_block, "attention_input")

    def _validate_bottleneck_direction(self, owner: str) -> None:
        """Whether the intra-block may be wider (the teacher) or narrower (a student): each family's own check."""


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
        # Defined on purpose: transformers 5 replaces an inherited ``__init__`` (see modular_minimoe.py).
        super().__init__(**kwargs)

    def _validate_bottleneck_direction(self, owner: str) -> None:
        if self.intra_bottleneck_size > self.hidden_size:
            raise ValueError(
                f"{owner}: `intra_bottleneck_size` ({self.intra_bottleneck_size}) must be <= `hidden_size` "
                f"({self.hidden_size}): MobileBERT is the bottleneck student; use IBBertConfig for an "
                "inverted-bottleneck teacher."
            )
