"""Training arguments of MobileBERT layer-wise knowledge transfer (paper 001 §3.5-3.6)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainingArguments, get_scheduler

from ..training.training_arguments import CompactBertTrainingArguments
from .mobilebert_stages import STRATEGIES

__all__ = ["MobileBertDistillationConfig", "build_base_scheduler"]


def build_base_scheduler(
    args: TrainingArguments, optimizer: torch.optim.Optimizer, num_training_steps: int
) -> LambdaLR:
    """The schedule ``args`` asks for, before the stage multipliers. Only ``LambdaLR`` schedules (a factor
    of the initial learning rate per step) compose with per-unit multipliers; the metric-driven ones
    (``reduce_lr_on_plateau``, and ``greedy`` in transformers 5) rescale the learning rate in place from the
    evaluation loss and cannot tell a stage's multiplier from their own decay."""
    try:
        scheduler = get_scheduler(
            args.lr_scheduler_type,
            optimizer,
            num_warmup_steps=args.get_warmup_steps(num_training_steps),
            num_training_steps=num_training_steps,
            scheduler_specific_kwargs=args.lr_scheduler_kwargs,
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"`lr_scheduler_type` {_scheduler_name(args)!r} cannot be built: {error}") from None
    if not isinstance(scheduler, LambdaLR):
        raise ValueError(
            f"`lr_scheduler_type` {_scheduler_name(args)!r} ({type(scheduler).__name__}) adapts the learning rate to a "
            "metric and cannot be combined with the MobileBERT stage multipliers; use a step-based schedule such as "
            "linear, cosine, cosine_with_restarts, polynomial, constant, constant_with_warmup or inverse_sqrt."
        )
    return scheduler


def _scheduler_name(args: TrainingArguments) -> str:
    return getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)


@dataclass
class MobileBertDistillationConfig(CompactBertTrainingArguments):
    """``TrainingArguments`` plus the knowledge-transfer options; stages are counted in optimizer steps,
    so ``max_steps`` must be set."""

    strategy: str = field(
        default="pkt",
        metadata={
            "help": "akt (auxiliary: one combined loss), jkt (joint layer-wise, then pre-training "
            "distillation) or pkt (progressive, one layer per stage, then pre-training distillation)."
        },
    )
    feature_map_weight: float = field(default=1.0, metadata={"help": "Weight of feature-map transfer (eq. 2)."})
    attention_weight: float = field(default=1.0, metadata={"help": "Weight of attention transfer (eq. 3)."})
    normalized_feature_map_loss: bool = field(
        default=True,
        metadata={"help": "Split feature-map transfer into normalized-feature MSE + mean/variance MSE (§3.5)."},
    )
    alpha: float = field(
        default=0.5, metadata={"help": "α of pre-training distillation α·MLM + (1−α)·KD + NSP (eq. 4)."}
    )
    temperature: float = field(default=1.0, metadata={"help": "Softmax temperature of the MLM distillation loss."})
    layerwise_steps: int | None = field(
        default=None,
        metadata={"help": "JKT: optimizer steps of the joint layer-wise phase (default: half of max_steps)."},
    )
    steps_per_stage: int | None = field(
        default=None,
        metadata={
            "help": "PKT: optimizer steps per layer stage (default: max_steps // (2 · layers), leaving "
            "the other half for pre-training distillation)."
        },
    )
    lower_layer_lr_scale: float = field(
        default=0.0,
        metadata={
            "help": "PKT: learning-rate multiplier of the layers below the trained one (0 = frozen; the "
            "paper's softened variant uses a small value such as 0.1)."
        },
    )
    ddp_find_unused_parameters: bool | None = field(
        default=True, metadata={"help": "Stages freeze parts of the student, so DDP must tolerate unused parameters."}
    )

    def __post_init__(self):
        super().__post_init__()
        if self.strategy not in STRATEGIES:
            raise ValueError(f"`strategy` must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}.")
        if self.max_steps is None or self.max_steps <= 0:
            raise ValueError("`max_steps` must be set (> 0): the strategies' stages are counted in optimizer steps.")
        for name in ("feature_map_weight", "attention_weight", "temperature"):
            if getattr(self, name) < 0 or (name == "temperature" and self.temperature == 0):
                raise ValueError(
                    f"`{name}` must be {'> 0' if name == 'temperature' else '>= 0'}, got {getattr(self, name)}."
                )
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"`alpha` must be in [0, 1], got {self.alpha}.")
        if not 0.0 <= self.lower_layer_lr_scale <= 1.0:
            raise ValueError(f"`lower_layer_lr_scale` must be in [0, 1], got {self.lower_layer_lr_scale}.")
        if self.layerwise_steps is not None and not 0 < self.layerwise_steps <= self.max_steps:
            raise ValueError(
                f"`layerwise_steps` must be in [1, max_steps={self.max_steps}], got {self.layerwise_steps}."
            )
        if self.steps_per_stage is not None and self.steps_per_stage < 1:
            raise ValueError(f"`steps_per_stage` must be >= 1, got {self.steps_per_stage}.")
        # Build the schedule once on a throw-away parameter: an unsupported type or missing
        # `lr_scheduler_kwargs` fails here, not after the data is tokenized and the models are built.
        build_base_scheduler(self, torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), self.max_steps)
