"""Training arguments of ``compact-bert finetune``: the papers' fine-tuning settings as defaults.

Sources: paper 002 (MiniMoE) Table 8 "Finetuning" column — AdamW, batch size {16, 32}, 10 epochs, early stop
after 5 epochs without improvement, warm-up proportion 0.1, weight decay 0.01, learning rates
{1e-5, 2e-5, 3e-5} / {1e-4, 2e-4, 3e-4} (GLUE / CoNLL grids); paper 003 (MoE-BERT TCD) appendix B — at most 10
epochs, batch size 32, warm-up ratio 0.06, linear decay, weight decay 0.01, learning rates {1e-5, 2e-5, 5e-5}
for full fine-tuning, results averaged over several runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..training.compat import TRANSFORMERS_5
from ..training.training_arguments import CompactBertTrainingArguments
from .task_recipe import (
    ATTENTION_WEIGHT,
    AUGMENT_COPIES,
    AUGMENT_PAIR_RECOMBINED,
    AUGMENT_PAIR_SENTENCES,
    AUGMENT_PAIR_SWAP,
    AUGMENT_WORD_NEIGHBOURS,
    DISTILLATION_ALPHA,
    DISTILLATION_TEMPERATURE,
    HIDDEN_WEIGHT,
    LEARNING_RATE,
    NARROWED_DISTILLATION_ALPHA,
    REGRESSION_DISTILLATION_ALPHA,
    SOFT_TARGETS_ALONE_MAX_CHANNELS,
)

__all__ = ["FinetuneConfig"]

_WARMUP_HELP = (
    "Linear warm-up as a proportion of the training steps: 0.1 (paper 002 Table 8; paper 003 uses 0.06). "
    "{} Either spelling (--warmup_ratio / --warmup_steps R<1) works on both transformers lines."
)


@dataclass
class FinetuneConfig(CompactBertTrainingArguments):
    """``TrainingArguments`` with the papers' fine-tuning defaults, plus seeds, a learning-rate grid, early
    stopping and the MoE balance-loss coefficient."""

    output_dir: str | None = field(
        default="outputs/finetune", metadata={"help": "Where the fine-tuned model is saved."}
    )
    learning_rate: float = field(
        default=2e-5,
        metadata={
            "help": "Peak AdamW learning rate (2e-5: in both papers' full fine-tuning grids). With --teacher the "
            f"task-distillation recipe's {LEARNING_RATE:g} unless given (finetuning/task_recipe.py)."
        },
    )
    num_train_epochs: float = field(
        default=10.0,
        metadata={
            "help": "Epochs (10 in papers 002 and 003). With --teacher the task-distillation recipe's 3 unless given, "
            "as its other training settings: batch 32, length-grouped batches, the final model evaluated once "
            "(finetuning/task_recipe.py)."
        },
    )
    per_device_train_batch_size: int = field(
        default=32, metadata={"help": "Examples per device and step (32: papers 002, 003)."}
    )
    per_device_eval_batch_size: int = field(default=64, metadata={"help": "Examples per device in evaluation."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (0.01: papers 002, 003)."})
    if TRANSFORMERS_5:
        warmup_steps: float = field(
            default=0.1, metadata={"help": _WARMUP_HELP.format("A value >= 1 is a step count.")}
        )
    else:
        warmup_ratio: float = field(default=0.1, metadata={"help": _WARMUP_HELP.format("")})
    eval_strategy: str = field(default="epoch", metadata={"help": "Evaluate on the dev set after every epoch."})
    save_strategy: str = field(default="epoch", metadata={"help": "Checkpoint after every epoch (must match eval)."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Keep at most this many checkpoints."})
    load_best_model_at_end: bool = field(
        default=True, metadata={"help": "Keep the checkpoint with the best dev metric (the papers report the best)."}
    )
    logging_strategy: str = field(default="epoch", metadata={"help": "Log train loss terms once per epoch."})
    early_stopping_patience: int | None = field(
        default=5,
        metadata={
            "help": "Stop after this many evaluations without dev improvement (paper 002 Table 8: 5 epochs); "
            "0 or a negative value disables early stopping."
        },
    )
    router_aux_loss_coef: float | None = field(
        default=None,
        metadata={
            "help": "MoE models: weight of the balance loss during fine-tuning. Default: keep the checkpoint's "
            "(MiniMoE α = 0.01, paper 002 §3.2, applied at fine-tuning too per its Fig. 5; MoE-BERT "
            "λ_B = 1000, paper 003 appendix A). 0 turns balancing off."
        },
    )
    seeds: list[int] = field(
        default_factory=list,
        metadata={
            "help": "Run once per seed (output_dir/seed-N) and report mean ± std of the dev metrics; "
            "default: one run with --seed."
        },
    )
    learning_rate_grid: list[float] = field(
        default_factory=list,
        metadata={
            "help": "Run every learning rate (output_dir/lr-X/...) and report the best seed-averaged dev "
            "result. Papers: 1e-5 2e-5 3e-5 (002, GLUE), 1e-4 2e-4 3e-4 (002, CoNLL), 1e-5 2e-5 5e-5 (003)."
        },
    )

    distillation_alpha: float | None = field(
        default=None,
        metadata={
            "help": "With --teacher: weight of the hard-label loss; the teacher's soft targets get 1 - alpha "
            "(0 = learn from the teacher alone, 1 = ignore it on the training examples; augmented copies always "
            f"learn the teacher's prediction). Default: the task-distillation recipe's, {DISTILLATION_ALPHA} for "
            f"classification and tagging ({NARROWED_DISTILLATION_ALPHA} for a tiny student that --max_latency_ratio "
            f"narrowed to at most {SOFT_TARGETS_ALONE_MAX_CHANNELS:g} of the teacher's channels), "
            f"{REGRESSION_DISTILLATION_ALPHA} for regression (finetuning/task_recipe.py)."
        },
    )
    distillation_temperature: float = field(
        default=DISTILLATION_TEMPERATURE,
        metadata={
            "help": "With --teacher: softmax temperature T of the soft targets (the loss is scaled by T^2, "
            "Hinton et al. 2015; DistilBERT uses 2). Regression distills the teacher's value with MSE."
        },
    )
    distillation_hidden_weight: float = field(
        default=HIDDEN_WEIGHT,
        metadata={
            "help": "With --teacher: weight β of the intermediate-layer loss, the student's embeddings and hidden "
            "states against the teacher's layers it started from (TinyBERT's task stage, eq. 8; relations of the "
            f"states where the widths differ). 0 distills the predictions only; > 0 runs the teacher on every "
            f"training batch. Default {HIDDEN_WEIGHT}: the task-distillation recipe (finetuning/task_recipe.py)."
        },
    )
    distillation_attention_weight: float = field(
        default=ATTENTION_WEIGHT,
        metadata={
            "help": "With --teacher: weight γ of the attention loss, each student layer's attention distributions "
            "against those of the teacher layer it started from (TinyBERT's task stage, eq. 7, as a KL per head; "
            "the head counts must match). > 0 runs the teacher on every training batch, both models with eager "
            f"attention. Default {ATTENTION_WEIGHT}: the task-distillation recipe (finetuning/task_recipe.py)."
        },
    )
    augment_copies: int | None = field(
        default=None,
        metadata={
            "help": "With --teacher: add this many perturbed copies of every training example (word masking "
            "and n-gram sampling, Tang et al. 2019; tagged sentences keep each tag with its word), labelled by the "
            f"teacher's predictions. Default: {AUGMENT_COPIES} with --teacher (the task-distillation recipe, "
            "finetuning/task_recipe.py), none without."
        },
    )
    unlabeled_file: str | None = field(
        default=None,
        metadata={
            "help": "With --teacher: in-domain examples without labels — a table (TSV, CSV or JSON lines) whose header "
            "names the training data's text column(s), any other column ignored; for NER, CoNLL text with one word "
            "per line (a tag after it ignored) and a blank line between sentences — labelled by the teacher and added "
            "to the transfer set beside the perturbed copies (real text the teacher never saw, Hinton et al. 2015; "
            "Tang et al. 2019). --max_train_samples does not cut it. Default: none."
        },
    )
    augment_pair_sentences: str = field(
        default=AUGMENT_PAIR_SENTENCES,
        metadata={
            "help": "Sentence-pair tasks with --augment_copies: 'both' perturbs each sentence of a copy, 'one' "
            "perturbs one of the two (drawn at random) and keeps its partner whole. Default: the task-distillation "
            "recipe's (finetuning/task_recipe.py)."
        },
    )
    augment_pair_swap: bool = field(
        default=AUGMENT_PAIR_SWAP,
        metadata={
            "help": "Sentence-pair tasks with --augment_copies: each copy also trades its two sentences' places with "
            "probability 1/2 (the teacher labels the pair in the other order). Default: the task-distillation "
            "recipe's (finetuning/task_recipe.py)."
        },
    )
    augment_pair_recombined: int | None = field(
        default=None,
        metadata={
            "help": "Sentence-pair tasks with --teacher: add up to N new pairs per training pair, its first sentence "
            "with the N training sentences closest to it in words (TF-IDF cosine; Augmented SBERT's sampling, "
            f"finetuning/pair_recombination.py), labelled by the teacher. Default: {AUGMENT_PAIR_RECOMBINED} for a "
            "sentence-pair task with --teacher (the task-distillation recipe, finetuning/task_recipe.py), none "
            "otherwise."
        },
    )
    augment_word_neighbours: int = field(
        default=AUGMENT_WORD_NEIGHBOURS,
        metadata={
            "help": "With --augment_copies: K > 0 also replaces words of the copies (each word not masked, with "
            "probability 0.4) by one of their K nearest neighbours in the teacher's word embeddings (TinyBERT's "
            "augmentation: K = 15, p = 0.4; finetuning/word_neighbours.py). 0: masking and n-gram sampling only. "
            f"Default {AUGMENT_WORD_NEIGHBOURS}: the task-distillation recipe (finetuning/task_recipe.py)."
        },
    )
    augmentation_seed: int = field(
        default=0,
        metadata={"help": "Seed of --augment_copies (independent of --seed, so seeds share a transfer set)."},
    )
    teacher_cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "With --teacher: where the teacher's logits are cached, keyed by teacher, tokenizer, data "
            "and max length (default: $COMPACT_BERT_CACHE or ~/.cache/compact_bert/teacher_outputs)."
        },
    )
    capacity_factor: str = field(
        default="none",
        metadata={
            "help": "MoE models: expert capacity while fine-tuning. 'none' (default): no limit, no token is "
            "dropped even when the task's text routes differently from the distillation corpus; "
            "'checkpoint': the model's own (e.g. 1.25); or a number > 0."
        },
    )

    rebalance_routers: bool = field(
        default=False,
        metadata={
            "help": "MoE models: before training, shift each learned router's bias so that the first 256 "
            "training examples spread evenly over its experts (for a router learned on other text; see "
            "finetuning/router_rebalancing.py)."
        },
    )

    def resolved_capacity_factor(self, checkpoint_value: float | None) -> float | None:
        """The capacity factor to fine-tune with, given the checkpoint's."""
        if self.capacity_factor == "none":
            return None
        if self.capacity_factor == "checkpoint":
            return checkpoint_value
        return float(self.capacity_factor)

    def __post_init__(self):
        if self.capacity_factor not in ("none", "checkpoint"):
            try:
                value = float(self.capacity_factor)
            except ValueError:
                value = float("nan")
            if not value > 0:
                raise ValueError(
                    f"`capacity_factor` must be 'none', 'checkpoint' or a number > 0, got {self.capacity_factor!r}."
                )
        if self.augment_pair_sentences not in ("both", "one"):
            raise ValueError(f"`augment_pair_sentences` must be 'both' or 'one', got {self.augment_pair_sentences!r}.")
        if self.augment_pair_recombined is not None and self.augment_pair_recombined < 0:
            raise ValueError(f"`augment_pair_recombined` must be >= 0, got {self.augment_pair_recombined}.")
        if self.augment_copies is not None and self.augment_copies < 0:
            raise ValueError(f"`augment_copies` must be >= 0, got {self.augment_copies}.")
        if self.distillation_alpha is not None and not 0.0 <= self.distillation_alpha <= 1.0:
            raise ValueError(f"`distillation_alpha` must be in [0, 1], got {self.distillation_alpha}.")
        if not self.distillation_hidden_weight >= 0:
            raise ValueError(f"`distillation_hidden_weight` must be >= 0, got {self.distillation_hidden_weight}.")
        if self.augment_word_neighbours < 0:
            raise ValueError(f"`augment_word_neighbours` must be >= 0, got {self.augment_word_neighbours}.")
        if not self.distillation_attention_weight >= 0:
            raise ValueError(
                f"`distillation_attention_weight` must be >= 0, got {self.distillation_attention_weight}."
            )
        if not self.distillation_temperature > 0:
            raise ValueError(f"`distillation_temperature` must be > 0, got {self.distillation_temperature}.")
        if self.early_stopping_patience is not None and self.early_stopping_patience <= 0:
            self.early_stopping_patience = None
        if self.router_aux_loss_coef is not None and self.router_aux_loss_coef < 0:
            raise ValueError(f"`router_aux_loss_coef` must be >= 0, got {self.router_aux_loss_coef}.")
        bad_rates = [rate for rate in self.learning_rate_grid if not rate > 0]
        if bad_rates:
            raise ValueError(f"`learning_rate_grid` values must be > 0, got {bad_rates}.")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"`seeds` must not repeat a seed, got {self.seeds}.")
        if len(set(self.learning_rate_grid)) != len(self.learning_rate_grid):
            raise ValueError(f"`learning_rate_grid` must not repeat a rate, got {self.learning_rate_grid}.")
        super().__post_init__()
        if not self.load_best_model_at_end:
            self.early_stopping_patience = None  # early stopping compares dev evaluations of saved checkpoints
