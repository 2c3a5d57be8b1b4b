"""Training arguments of embedding distillation: a student learns its teacher's sentence embeddings."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..training.compat import WarmupSteps
from ..training.training_arguments import CompactBertTrainingArguments

__all__ = ["EmbeddingDistillationConfig"]


@dataclass
class EmbeddingDistillationConfig(CompactBertTrainingArguments):
    """``L = embedding_weight · MSE(e_s, e_t) + relation_weight · L_relation + aux_loss``: ``e_s`` and ``e_t`` are the
    student's and the teacher's pooled (and, where the teacher normalises, L2-normalised) sentence embeddings, the
    MSE is sentence-transformers' ``MSELoss`` (the recipe its documentation gives for model distillation, Reimers &
    Gurevych 2020, eq. 1: ``‖M(s) − M̂(s)‖²`` averaged); ``L_relation`` optionally adds the MiniLMv2 Q-Q/K-K/V-V
    relations of the last layers (paper 002 §3.2), and ``aux_loss`` is an MoE student's balance loss.

    Defaults: a student that starts from its teacher, a few minutes on 2 CPU cores."""

    output_dir: str | None = field(
        default="outputs/embedding-student", metadata={"help": "Where the student is saved."}
    )
    num_train_epochs: float = field(
        default=2.0,
        metadata={
            "help": "Passes over the sentences (if --max_steps is -1): two take the default student to 98.5%% of "
            "the packaged teacher's STS-B Spearman in about 6 minutes on 2 CPU cores (docs/embeddings.md)."
        },
    )
    per_device_train_batch_size: int = field(default=64, metadata={"help": "Sentences per device and step."})
    per_device_eval_batch_size: int = field(default=128, metadata={"help": "Sentences per evaluation batch."})
    learning_rate: float = field(
        default=1e-4,
        metadata={
            "help": "Peak learning rate: 1e-4 for a student that starts from its teacher (the default); random "
            "students (--init_from_teacher none) learn faster at 5e-4."
        },
    )
    warmup_steps: WarmupSteps = field(default=50, metadata={"help": "Linear warm-up steps."})
    logging_steps: float = field(default=50, metadata={"help": "Log every N steps."})
    save_steps: float = field(
        default=200, metadata={"help": "Checkpoint every N steps (resume with --resume_from_checkpoint last)."}
    )
    save_total_limit: int | None = field(default=2, metadata={"help": "Keep at most this many checkpoints."})
    eval_strategy: str = field(default="no", metadata={"help": "'steps' also evaluates every --eval_steps."})
    remove_unused_columns: bool = field(
        default=False, metadata={"help": "Kept: the batches carry the index of each sentence's teacher embedding."}
    )
    embedding_weight: float = field(default=1.0, metadata={"help": "Weight of the MSE to the teacher's embeddings."})
    relation_weight: float = field(
        default=0.0,
        metadata={
            "help": "Weight of the MiniLMv2 relation loss between the last layers (0: off; needs a teacher "
            "forward pass per step, so it is slower)."
        },
    )
    num_relation_heads: int = field(default=32, metadata={"help": "Relation heads R of the relation loss."})
    max_seq_length: int = field(
        default=128, metadata={"help": "Tokens per sentence (longer sentences are cut), in training and evaluation."}
    )
    ddp_find_unused_parameters: bool | None = field(
        default=True, metadata={"help": "The pooler and experts without tokens get no gradient; DDP must tolerate it."}
    )

    def __post_init__(self):
        super().__post_init__()
        for name in ("embedding_weight", "relation_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"`{name}` must be >= 0, got {getattr(self, name)}.")
        if self.embedding_weight == 0 and self.relation_weight == 0:
            raise ValueError("`embedding_weight` and `relation_weight` are both 0: nothing would be distilled.")
        if self.num_relation_heads < 1:
            raise ValueError(f"`num_relation_heads` must be >= 1, got {self.num_relation_heads}.")
        if not 2 <= self.max_seq_length <= 512:
            raise ValueError(f"`max_seq_length` must be in [2, 512], got {self.max_seq_length}.")
