"""Training arguments of MiniLMv2 relation distillation into MiniMoE students (paper 002 §3.2)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..training.compat import WarmupSteps
from ..training.training_arguments import CompactBertTrainingArguments

__all__ = ["MiniMoEDistillationConfig"]


@dataclass
class MiniMoEDistillationConfig(CompactBertTrainingArguments):
    """``TrainingArguments`` plus relation-distillation options. Defaults make the main job: a few
    minutes on 2 CPU cores (``compact-bert distill minimoe`` with no arguments)."""

    output_dir: str | None = field(default="outputs/minimoe-student", metadata={"help": "Where the student is saved."})
    max_steps: int = field(
        default=50,
        metadata={
            "help": "Optimizer steps of general distillation (the paper trains far longer; a student that starts "
            "from its teacher needs few); -1 trains --num_train_epochs instead."
        },
    )
    per_device_train_batch_size: int = field(default=16, metadata={"help": "Blocks per device and step."})
    learning_rate: float = field(
        default=1e-4,
        metadata={
            "help": "Peak learning rate: 1e-4 for a student that starts from its teacher (the default); a student "
            "from random weights (--init_from_teacher none) learns faster at 1e-3."
        },
    )
    warmup_steps: WarmupSteps = field(default=5, metadata={"help": "Linear warm-up steps."})
    logging_steps: float = field(default=20, metadata={"help": "Log every N steps."})
    save_steps: float = field(
        default=25, metadata={"help": "Checkpoint every N steps (resume with --resume_from_checkpoint last)."}
    )
    save_total_limit: int | None = field(default=2, metadata={"help": "Keep at most this many checkpoints."})
    teacher_layer: int = field(
        default=-1,
        metadata={
            "help": "Teacher layer whose relations are distilled (-1 = last; an upper-middle layer, e.g. "
            "-4, for large teachers as in MiniLMv2)."
        },
    )
    num_relation_heads: int = field(default=32, metadata={"help": "Relation heads R (32 in the paper)."})
    relation_weight: float = field(default=1.0, metadata={"help": "Weight of the Q-Q/K-K/V-V relation loss."})
    ddp_find_unused_parameters: bool | None = field(
        default=True, metadata={"help": "The pooler gets no gradient during distillation; DDP must tolerate it."}
    )

    def __post_init__(self):
        super().__post_init__()
        if self.num_relation_heads < 1:
            raise ValueError(f"`num_relation_heads` must be >= 1, got {self.num_relation_heads}.")
        if self.relation_weight < 0:
            raise ValueError(f"`relation_weight` must be >= 0, got {self.relation_weight}.")
