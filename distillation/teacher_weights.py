"""Any BERT-like encoder's weights in one standard structure, so that a student can be initialized from it.

BertModel, RobertaModel (and the other transformers encoders that keep BERT's module names), our dense MiniLM /
MiniMoE / MoE-BERT models and their task heads all name their submodules alike: ``embeddings.word_embeddings``,
``encoder.layer.<i>.attention.self.query`` ... ``output.LayerNorm``. ``read_encoder_weights`` reads them through
those names, the way TextBrewer's adaptors turn every model into one structure, and refuses with the field at fault
what cannot map onto a post-LN BERT student (MobileBERT's bottlenecks, another activation, a missing module).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..configuration.dense_students import PADDING_OFFSET_POSITIONS
from ..training.run_errors import RunSettingsError

__all__ = [
    "PADDING_OFFSET_POSITIONS",
    "EncoderWeights",
    "LayerWeights",
    "TeacherShapeError",
    "linear_weights",
    "read_encoder_weights",
]

# Encoders whose position ids start after the padding index (``create_position_ids_from_input_ids``,
# ``PADDING_OFFSET_POSITIONS``): their position-embedding rows for positions 0, 1, ... begin at ``pad_token_id + 1``.
# Families with bottlenecks or stacked FFNs: their layers are not BERT layers, whatever their module names.
_NOT_BERT_LIKE = ("mobilebert", "compact_mobilebert", "ib_bert")


class TeacherShapeError(RunSettingsError):
    """The teacher cannot initialize this student; the message names the config field and what would be valid."""


@dataclass
class LayerWeights:
    """One post-LN transformer layer. Linear weights are ``[out, in]`` as in ``nn.Linear``. A dense FFN has
    ``ffn_in_weight [inter, hidden]`` and ``ffn_out_weight [hidden, inter]``; an MoE teacher's FFN is stacked
    ``[experts, inter, hidden]`` / ``[experts, hidden, inter]`` with its router in ``router_weight``."""

    query: tuple[torch.Tensor, torch.Tensor]
    key: tuple[torch.Tensor, torch.Tensor]
    value: tuple[torch.Tensor, torch.Tensor]
    attention_output: tuple[torch.Tensor, torch.Tensor]
    attention_norm: tuple[torch.Tensor, torch.Tensor]
    ffn_in: tuple[torch.Tensor, torch.Tensor]
    ffn_out: tuple[torch.Tensor, torch.Tensor]
    ffn_norm: tuple[torch.Tensor, torch.Tensor]
    router: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def num_experts(self) -> int:
        return 1 if self.ffn_in[0].dim() == 2 else self.ffn_in[0].shape[0]


@dataclass
class EncoderWeights:
    """A BERT-like encoder's weights (detached views), its shape fields, and where positions start."""

    model_type: str
    hidden_size: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str
    word_embeddings: torch.Tensor
    position_embeddings: torch.Tensor  # rows for positions 0, 1, ... (a RoBERTa offset already applied)
    position_offset_rows: torch.Tensor  # the rows a RoBERTa-like table keeps before position 0 (none for BERT)
    token_type_embeddings: torch.Tensor
    embedding_norm: tuple[torch.Tensor, torch.Tensor]
    layers: list[LayerWeights]
    pooler: tuple[torch.Tensor, torch.Tensor] | None

    @property
    def num_hidden_layers(self) -> int:
        return len(self.layers)

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads


def linear_weights(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """A linear (or LayerNorm) module's weight and bias, detached."""
    return module.weight.detach(), module.bias.detach()


def _layer(layer: nn.Module, index: int) -> LayerWeights:
    attention = layer.attention
    if not isinstance(attention.self.query, nn.Linear):
        raise TeacherShapeError(
            f"The teacher's layer {index} has mixture-of-experts attention (num_attention_experts > 1); only a dense "
            "attention block can initialize a student."
        )
    ffn_in = ffn_out = router = None
    if hasattr(layer, "moe"):
        experts = layer.moe.experts
        ffn_in = (experts.up_proj.detach(), experts.up_proj_bias.detach())
        ffn_out = (experts.down_proj.detach(), experts.down_proj_bias.detach())
        gate = getattr(layer.moe.router, "gate", None)
        router = linear_weights(gate) if gate is not None else None
    else:
        ffn_in, ffn_out = linear_weights(layer.intermediate.dense), linear_weights(layer.output.dense)
    return LayerWeights(
        query=linear_weights(attention.self.query),
        key=linear_weights(attention.self.key),
        value=linear_weights(attention.self.value),
        attention_output=linear_weights(attention.output.dense),
        attention_norm=linear_weights(attention.output.LayerNorm),
        ffn_in=ffn_in,
        ffn_out=ffn_out,
        ffn_norm=linear_weights(layer.output.LayerNorm),
        router=router,
    )


def read_encoder_weights(model: nn.Module) -> EncoderWeights:
    """The weights of ``model`` (a base encoder or a model with a task head) as an ``EncoderWeights``."""
    config = model.config
    model_type = getattr(config, "model_type", "")
    if model_type in _NOT_BERT_LIKE:
        raise TeacherShapeError(
            f"A {model_type!r} teacher cannot initialize a post-LN BERT student: its layers have bottlenecks and "
            "stacked FFNs (model_type must be a BERT-like encoder: bert, roberta, minimoe, moe_bert, ...)."
        )
    encoder = getattr(model, "base_model", model)
    try:
        embeddings, layers = encoder.embeddings, list(encoder.encoder.layer)
        word = embeddings.word_embeddings.weight.detach()
        position = embeddings.position_embeddings.weight.detach()
        token_type = embeddings.token_type_embeddings.weight.detach()
        embedding_norm = linear_weights(embeddings.LayerNorm)
        layer_weights = [_layer(layer, index) for index, layer in enumerate(layers)]
    except AttributeError as error:
        raise TeacherShapeError(
            f"The teacher ({type(model).__name__}, model_type {model_type!r}) is not BERT-like: {error}. Expected "
            "embeddings.{word,position,token_type}_embeddings and encoder.layer.<i>.attention.self.query ... "
            "output.LayerNorm, as BertModel, RobertaModel and compact-bert's MiniMoE / MoE-BERT name them."
        ) from None
    if getattr(config, "position_embedding_type", "absolute") not in ("absolute", None):
        raise TeacherShapeError(
            f"The teacher's position_embedding_type is {config.position_embedding_type!r}; a student's learned "
            "absolute positions can only start from 'absolute' ones."
        )
    offset_rows = position[:0]
    if model_type in PADDING_OFFSET_POSITIONS:
        offset_rows, position = position[: config.pad_token_id + 1], position[config.pad_token_id + 1 :]
    pooler = getattr(encoder, "pooler", None)
    hidden_act = config.hidden_act if isinstance(config.hidden_act, str) else type(config.hidden_act).__name__
    return EncoderWeights(
        model_type=model_type,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=layer_weights[0].ffn_in[0].shape[-2],
        hidden_act=hidden_act,
        word_embeddings=word,
        position_embeddings=position,
        position_offset_rows=offset_rows,
        token_type_embeddings=token_type,
        embedding_norm=embedding_norm,
        layers=layer_weights,
        pooler=None if pooler is None else linear_weights(pooler.dense),
    )
