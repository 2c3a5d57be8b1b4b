"""Base class of every compact-bert model: weight init, gradient checkpointing, Hub-ready saving."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel

from .moe_layer import ExpertLinear, MoEExperts
from .normalization import NoNorm
from .remote_code import SavesRemoteCode

__all__ = ["CompactBertPreTrainedModel"]


class CompactBertPreTrainedModel(SavesRemoteCode, PreTrainedModel):
    """Shared behaviour; each family subclasses it with its ``config_class`` and ``base_model_prefix``.

    Within compact-bert, ``save_pretrained`` (of the package-only ``SavesRemoteCode`` mixin) also writes
    the self-contained remote code next to the weights and the ``auto_map`` into ``config.json``, so
    ``AutoModel*.from_pretrained(dir, trust_remote_code=True)`` works in a process that never installed
    compact-bert.
    """

    supports_gradient_checkpointing = True
    _supports_sdpa = True
    # Head losses are per-batch means, so Trainer must scale them for gradient accumulation itself rather
    # than pass ``num_items_in_batch`` (which it would, seeing the heads' ``**backbone_kwargs``).
    accepts_loss_kwargs = False

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, (nn.LayerNorm, NoNorm)):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()
        elif isinstance(module, ExpertLinear):
            module.weight.data.normal_(mean=0.0, std=std)
            module.bias.data.zero_()
        elif isinstance(module, MoEExperts):
            for weight in (module.fc1_weight, module.fc2_weight):
                weight.data.normal_(mean=0.0, std=std)
            for bias in (module.fc1_bias, module.fc2_bias):
                bias.data.zero_()
        elif hasattr(module, "bias") and isinstance(module.bias, nn.Parameter) and module.bias.dim() == 1:
            # The stand-alone output bias of masked-LM prediction heads.
            module.bias.data.zero_()

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None) -> None:
        """Non-reentrant checkpointing by default: layers return routing decisions (balance loss
        included) next to the hidden states, and reentrant checkpointing would detach them."""
        kwargs = {"use_reentrant": False, **(gradient_checkpointing_kwargs or {})}
        super().gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

    def check_inputs(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> None:
        """Fail with a clear message instead of a shape error deep inside ``forward``."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:-1]
        if len(shape) != 2:
            raise ValueError(f"Inputs must be [batch, sequence], got shape {tuple(shape)}.")
        limit = self.config.max_position_embeddings
        if shape[1] > limit:
            raise ValueError(
                f"Sequence length {shape[1]} exceeds `max_position_embeddings` ({limit}) of this model; "
                f"truncate inputs to at most {limit} tokens."
            )
