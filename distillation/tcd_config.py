"""Training arguments of transfer-capability distillation for MoE-BERT (paper 003 §2.3-2.4, eq. 13)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..training.training_arguments import CompactBertTrainingArguments

__all__ = ["TransferCapabilityDistillationConfig"]


@dataclass
class TransferCapabilityDistillationConfig(CompactBertTrainingArguments):
    """``L = L_MLM + λ_B·L_B + λ_T·L_T + λ_I·L_I + λ_A·L_A``; λ_B is the student's ``router_aux_loss_coef``
    (1000 in the MoE-BERT presets), the others are here. Paper: λ_T = λ_I = 1; λ_A = 1 at H=768, 0 at H=128.

    The defaults run as they are (``compact-bert distill tcd --teacher DIR``): the sampled tokens fit the
    default batch. For the paper's scale use ``--sampled_tokens 4096`` with batches of at least 32 blocks of
    128 tokens per process."""

    trunk_weight: float = field(default=1.0, metadata={"help": "λ_T: relations of the normalized trunk states."})
    inner_weight: float = field(
        default=1.0, metadata={"help": "λ_I: relations of sublayer outputs before the residual add."}
    )
    attention_weight: float = field(
        default=0.0, metadata={"help": "λ_A: query-key cosine relations (paper: 1 for H=768, 0 for H=128)."}
    )
    sampled_tokens: int = field(
        default=512,
        metadata={
            "help": "Tokens sampled per batch (and per process) for trunk/inner relations; at most the tokens "
            "of a training batch (per_device_train_batch_size x block_size). Default 512 = 4 groups of 128, "
            "which fits the default batch of 8 blocks x 128 tokens; the paper's large-batch setting is "
            "4096 = 32 x 128."
        },
    )
    token_group_size: int = field(default=128, metadata={"help": "Tokens per relation group (128 in the paper)."})
    layer_map: str | None = field(
        default=None,
        metadata={
            "help": "JSON list: the teacher layer aligned with each student layer, e.g. '[1, 3, 5]'. "
            "Default: layer i with layer i (layer counts must then match)."
        },
    )
    dataloader_drop_last: bool = field(
        default=True, metadata={"help": "Relations sample a fixed number of tokens, so partial batches are dropped."}
    )
    ddp_find_unused_parameters: bool | None = field(
        default=True,
        metadata={"help": "Experts that receive no token in a step get no gradient; DDP must tolerate it."},
    )

    def __post_init__(self):
        super().__post_init__()
        for name in ("trunk_weight", "inner_weight", "attention_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"`{name}` must be >= 0, got {getattr(self, name)}.")
        if self.token_group_size < 2 or self.sampled_tokens < self.token_group_size:
            raise ValueError(
                f"`token_group_size` must be >= 2 and <= `sampled_tokens`, got {self.token_group_size} and {self.sampled_tokens}."
            )
        if self.sampled_tokens % self.token_group_size:
            raise ValueError(
                f"`sampled_tokens` ({self.sampled_tokens}) must be a multiple of `token_group_size` ({self.token_group_size})."
            )
        if self.layer_map is not None:
            try:
                parsed = json.loads(self.layer_map)
            except json.JSONDecodeError as error:
                raise ValueError(f"`layer_map` must be a JSON list of integers: {error}") from None
            if not isinstance(parsed, list) or not all(
                isinstance(item, int) and not isinstance(item, bool) for item in parsed
            ):
                raise ValueError(f"`layer_map` must be a JSON list of integers, got {self.layer_map!r}.")

    @property
    def parsed_layer_map(self) -> list[int] | None:
        return None if self.layer_map is None else json.loads(self.layer_map)
