"""The fine-tuning job: fine-tune and evaluate a compact-bert folder or preset, or any BERT-like transformers folder,
on sentence (pair) classification / regression or NER — with a teacher, by the task-distillation recipe.

``finetune(model_args, data_args, training_args)`` is the job as a library function (its inputs are the typed
arguments ``compact-bert finetune`` parses its flags into). Defaults are the papers' fine-tuning settings
(``finetuning/finetune_config.py``), and with a teacher the recipe's (``finetuning/task_recipe.py``). ``seeds``,
``learning_rate_grid`` and, with ``peft="lora"``, ``adapter_size_grid`` repeat the run
(``output_dir/[r-R/][lr-X/]seed-N``) and report the seed-averaged dev metrics of every setting and the best one in
``output_dir/run_summary.json``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import transformers
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
)

from ..configuration import PRESETS, preset_config
from ..configuration.dense_students import max_sequence_length
from ..distillation.data import default_tokenizer
from ..distillation.teacher_init_runner import (
    calibration_batches,
    initialization_blocker,
    initialize_student,
    prepare_initialization,
)
from ..distillation.teachers import load_encoder, resolve_model_path
from ..finetuning.augmentation import AUGMENTED_COLUMN, append_unlabeled, augment_split
from ..finetuning.data import (
    FinetuneDataArguments,
    load_finetuning_data,
    load_unlabeled_examples,
    tokenize_sequence_dataset,
    tokenize_token_dataset,
)
from ..finetuning.depth_budget import budgeted_overrides, check_max_latency_ratio
from ..finetuning.finetune_config import FinetuneConfig
from ..finetuning.finetune_trainer import FinetuneTrainer, build_compute_metrics, check_metric_name
from ..finetuning.intermediate_distillation import check_attention_heads
from ..finetuning.pair_recombination import recombine_pairs
from ..finetuning.router_rebalancing import rebalance_routers
from ..finetuning.run_honesty import ReportingEarlyStopping, reported_checkpoint, single_class_warning
from ..finetuning.task_distillation import (
    TaskDistillationTrainer,
    TeacherLogitsCollator,
    attach_teacher_logits,
    label_augmented_examples,
    load_task_teacher,
)
from ..finetuning.task_recipe import (
    AUGMENT_PAIR_RECOMBINED,
    NARROWED_STUDENT_EPOCHS,
    UNLABELED_STUDENT_EPOCHS,
    narrowed_student_epochs,
    student_augment_copies,
)
from ..finetuning.task_recipe import distillation_alpha as recipe_distillation_alpha
from ..finetuning.word_neighbours import WordNeighbours
from ..model_cards import write_model_card
from ..training.atomic_files import write_text_atomically
from ..training.compat import FROM_PRETRAINED_KWARGS, save_tokenizer
from ..training.output_folders import check_run_output
from ..training.run_errors import RunSettingsError
from ..training.text_files import parse_json_object
from .run_report import train_and_report, write_summary_and_card

__all__ = [
    "ADAPTER_SIZES_PAPER_003",
    "FinetuneModelArguments",
    "finetune",
    "label_config_fields",
    "save_merged",
    "summarize_runs",
    "with_peft_adapter",
]

logger = logging.getLogger(__name__)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt")
# Paper 003 appendix B: adapter sizes searched for adapter fine-tuning of its small models (H=128); its large
# models (H=768) add 256 (and 512 for MNLI).
ADAPTER_SIZES_PAPER_003 = (16, 64, 128)


@dataclass
class FinetuneModelArguments:
    model_name_or_path: str = field(
        metadata={
            "help": "A model folder (compact-bert or BERT-like transformers) or a preset name (a fresh model; "
            "see `compact-bert presets`)."
        }
    )
    model_overrides: dict | str | None = field(
        default_factory=dict,
        metadata={"help": "JSON object of config fields for a preset, e.g. '{\"num_hidden_layers\": 2}'."},
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={"help": "Tokenizer folder; default: the model folder's, else bert-base-uncased WordPiece."},
    )
    peft: str | None = field(
        default=None,
        metadata={
            "help": "Train a PEFT adapter (lora, ia3) and the task head instead of every weight; output_dir "
            "then holds the adapter. Default: full fine-tuning."
        },
    )
    peft_r: int = field(default=8, metadata={"help": "With --peft lora: the rank r."})
    adapter_size_grid: list[int] = field(
        default_factory=list,
        metadata={
            "help": "With --peft lora: run every LoRA rank r (output_dir/r-R/...), combined with "
            "--learning_rate_grid and --seeds, and report the best seed-averaged dev result. Paper 003 "
            "(appendix B) searches bottleneck-adapter sizes 16 64 128 for its small models (H=128) and "
            "16 64 128 256 for H=768, with adapter learning rates 1e-4 2e-4 3e-4; the rank is LoRA's "
            "counterpart of the adapter size."
        },
    )
    peft_alpha: float = field(default=16.0, metadata={"help": "With --peft lora: the scaling alpha."})
    peft_dropout: float | None = field(
        default=None,
        metadata={
            "help": "With --peft lora: dropout on the adapter's input; default 0.1, or 0 when the experts' "
            "stacked weights are adapted (PEFT's parameter LoRA cannot apply dropout)."
        },
    )
    peft_target_modules: str | None = field(
        default=None, metadata={"help": "Comma-separated module names to adapt; default: PEFT's for the model type."}
    )
    teacher: str | None = field(
        default=None,
        metadata={
            "help": "A teacher fine-tuned on this task (a folder with a task head over the same labels and the "
            "student's vocabulary): distill its predictions into the model (task distillation; see "
            "--distillation_alpha, --distillation_temperature). Its logits are computed once and cached."
        },
    )
    init_from_teacher: str = field(
        default="auto",
        metadata={
            "help": "For a preset: initialize it from a pretrained teacher instead of random weights (layer "
            "map, importance-ranked width, upcycled or split experts; see distillation/teacher_init.py). "
            "'auto' (default): from --teacher when its shapes allow; a folder or 'all-MiniLM-L6-v2': from "
            "that model; 'none': random initialization."
        },
    )
    layer_map: str = field(
        default="uniform",
        metadata={
            "help": "With teacher initialization: 0-based teacher layer of each student layer, comma-separated "
            "(e.g. '1,3,5'), or 'uniform' (evenly spaced, ending at the teacher's last layer)."
        },
    )
    max_latency_ratio: float | None = field(
        default=None,
        metadata={
            "help": "For a preset student with a teacher (--teacher or --init_from_teacher FOLDER): instead of the "
            "preset's depth, the deepest student whose latency is at most this share of the teacher's, measured "
            "here before training (batch 1 x 128, the same inference path; finetuning/depth_budget.py), e.g. 0.5; "
            "for a dense preset where no whole student half the teacher's depth fits, that depth narrowed, the "
            "widest residual stream that fits (0.3 against all-MiniLM-L6-v2: 3 layers of 320 channels, 10 heads and "
            "640 FFN neurons, else 320 / 10 / 448, else 288 / 9 / 576, else 256 / 8 / 768), "
            f"which trains {NARROWED_STUDENT_EPOCHS:g} epochs unless --num_train_epochs is given; at three quarters of "
            "the teacher's channels or fewer (288, 256) on the teacher's soft targets alone where the task has classes "
            "unless --distillation_alpha is given. With --unlabeled_file the narrowed shape is 256 / 8 / 512, taught "
            f"over the training data and the unlabeled text without copies, {UNLABELED_STUDENT_EPOCHS:g} epochs."
        },
    )
    merge: bool = field(
        default=False,
        metadata={
            "help": "With --peft: also save the adapter merged into the model in output_dir/merged, a plain "
            "model folder."
        },
    )

    def __post_init__(self):
        if self.model_overrides is None:
            self.model_overrides = {}
        if isinstance(self.model_overrides, str):  # the flag's JSON text, parsed once here
            self.model_overrides = parse_json_object(self.model_overrides, "model_overrides")
        if self.max_latency_ratio is not None:
            check_max_latency_ratio(self.max_latency_ratio)
        if self.merge and not self.peft:
            raise ValueError("--merge merges a PEFT adapter: give --peft too.")
        if self.adapter_size_grid:
            if self.peft != "lora":
                raise ValueError(
                    f"--adapter_size_grid sets the LoRA rank: it needs --peft lora (got --peft {self.peft})."
                )
            if any(size < 1 for size in self.adapter_size_grid) or len(set(self.adapter_size_grid)) != len(
                self.adapter_size_grid
            ):
                raise ValueError(f"--adapter_size_grid takes distinct ranks >= 1, got {self.adapter_size_grid}.")


def label_config_fields(task_type: str, label_names: list[str] | None) -> dict:
    """What a transformers script reads from ``config.json``: ``num_labels``, ``id2label``, ``label2id``,
    ``problem_type``."""
    if task_type == "regression":
        return {"num_labels": 1, "problem_type": "regression", "id2label": {0: "score"}, "label2id": {"score": 0}}
    fields = {
        "num_labels": len(label_names),
        "id2label": dict(enumerate(label_names)),
        "label2id": {name: index for index, name in enumerate(label_names)},
    }
    if task_type == "classification":
        fields["problem_type"] = "single_label_classification"
    return fields


def _teacher_folder(model_args: FinetuneModelArguments) -> Path | None:
    """The folder a preset student learns from or starts from (``--teacher``, else ``--init_from_teacher FOLDER``):
    the student is that model's architecture and reads its tokenizer. ``None`` for a model folder or no teacher."""
    if model_args.model_name_or_path not in PRESETS:
        return None
    source = model_args.teacher
    if source is None and model_args.init_from_teacher not in ("auto", "none"):
        source = model_args.init_from_teacher
    return None if source is None else resolve_model_path(source)


def _teacher_config(model_args: FinetuneModelArguments):
    """The config of ``_teacher_folder`` (``None`` when there is none), read once before anything is built."""
    folder = _teacher_folder(model_args)
    if folder is None:
        return None
    try:
        return AutoConfig.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as error:
        flag = "--teacher" if model_args.teacher else "--init_from_teacher"
        raise SystemExit(f"{flag} {folder}: its config.json cannot be read: {error}") from None


def _load_tokenizer(model_args: FinetuneModelArguments):
    """``--tokenizer_name``, else the model folder's own tokenizer (for a preset: its teacher's), else
    bert-base-uncased's. A ``--tokenizer_name`` whose vocabulary differs from the one saved with the model is
    refused: every id would index another token's embedding."""
    source = model_args.tokenizer_name
    folder = _teacher_folder(model_args) or Path(model_args.model_name_or_path)
    own = str(folder) if folder.is_dir() and any((folder / name).is_file() for name in TOKENIZER_FILES) else None
    try:
        tokenizer = default_tokenizer() if (source or own) is None else AutoTokenizer.from_pretrained(source or own)
    except (OSError, ValueError) as error:
        flag = f"--tokenizer_name {source}" if source is not None else f"--model_name_or_path {folder}"
        raise SystemExit(f"{flag}: no tokenizer loads from it ({error}).") from None
    if (
        source is not None
        and own is not None
        and AutoTokenizer.from_pretrained(own).get_vocab() != tokenizer.get_vocab()
    ):
        whose = "its teacher" if model_args.model_name_or_path in PRESETS else "the model"
        raise SystemExit(
            f"--tokenizer_name {source}: its vocabulary is not the one saved with {whose} in {own}; "
            f"drop --tokenizer_name to use {whose}'s tokenizer."
        )
    return tokenizer


def build_model(
    model_args: FinetuneModelArguments, config, task_type: str, label_names, training_args: FinetuneConfig
):
    """A fresh preset or a loaded folder of ``config`` (``_model_config``'s, copied: each run of a grid gets its own)
    with a task head for ``label_names`` (head weights that do not fit are re-initialized by the model's
    ``_init_weights``)."""
    auto_class = AutoModelForTokenClassification if task_type == "ner" else AutoModelForSequenceClassification
    fields = label_config_fields(task_type, label_names)
    name = model_args.model_name_or_path
    config = copy.deepcopy(config)
    for key, value in fields.items():
        setattr(config, key, value)
    if training_args.router_aux_loss_coef is not None:
        if not hasattr(config, "router_aux_loss_coef"):
            raise SystemExit(f"--router_aux_loss_coef: {config.model_type} models have no MoE balance loss.")
        config.router_aux_loss_coef = training_args.router_aux_loss_coef
    if hasattr(config, "capacity_factor"):
        config.capacity_factor = training_args.resolved_capacity_factor(config.capacity_factor)
    if getattr(config, "eval_capacity_factor", None) is not None:
        logger.warning(
            "eval_capacity_factor %s reset to None: evaluation never drops tokens.", config.eval_capacity_factor
        )
        config.eval_capacity_factor = None
    if name in PRESETS:
        return auto_class.from_config(config)
    from ..training.checked_loading import load_checked

    return load_checked(
        auto_class, name, "--model_name_or_path", config=config, ignore_mismatched_sizes=True, **FROM_PRETRAINED_KWARGS
    )


def _check_fits(config, tokenizer, max_length: int, teacher_folder: Path | None = None) -> None:
    if len(tokenizer) != config.vocab_size:
        if teacher_folder is not None:  # a preset reads its teacher's tokenizer and vocabulary size
            raise SystemExit(
                f"The teacher {teacher_folder} has a tokenizer of {len(tokenizer)} tokens but a vocab_size of "
                f"{config.vocab_size}: its ids would index other tokens' embeddings; save the teacher with the "
                "tokenizer it was trained with (or give the student's with --tokenizer_name)."
            )
        raise SystemExit(
            f"The tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {config.vocab_size}: "
            "its ids would index other tokens' embeddings; pass the model's own tokenizer with "
            "--tokenizer_name (or, for a preset, --model_overrides with its vocab_size)."
        )
    if max_length > max_sequence_length(config):
        raise SystemExit(
            f"--max_seq_length {max_length} exceeds the {max_sequence_length(config)} tokens the model's positions "
            f"cover (max_position_embeddings {config.max_position_embeddings})."
        )


def _mean_and_std(values: list[float]) -> dict:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


SETTING_KEYS = ("adapter_size", "learning_rate")  # what a grid varies; runs differing only in seed are averaged


def summarize_runs(runs: list[dict], metric_key: str, greater_is_better: bool = True) -> dict:
    """Per setting (learning rate, and the adapter size of LoRA runs): mean and sample standard deviation over
    seeds of every numeric ``eval_*`` value; ``best``: the setting whose seed-averaged ``metric_key`` is best."""
    by_setting: dict[tuple, list[dict]] = {}
    for run in runs:
        by_setting.setdefault(tuple((key, run[key]) for key in SETTING_KEYS if key in run), []).append(run)
    per_setting = []
    for setting, group in by_setting.items():
        keys = sorted(
            {
                key
                for run in group
                for key, value in run.items()
                if key.startswith("eval_") and isinstance(value, (int, float))
            }
        )
        per_setting.append(
            {
                **dict(setting),
                "seeds": [run["seed"] for run in group],
                **{key: _mean_and_std([run[key] for run in group if key in run]) for key in keys},
            }
        )
    scored = [entry for entry in per_setting if metric_key in entry]
    best = (max if greater_is_better else min)(scored, key=lambda entry: entry[metric_key]["mean"]) if scored else None
    return {"metric_for_best_model": metric_key, "per_setting": per_setting, "best": best, "runs": runs}


def _run_one(model_args, data_args, training_args, splits, tokenized, tokenizer, data_collator, start=None) -> dict:
    transformers.set_seed(training_args.seed)  # before the model (and its new head) is built
    model = build_model(model_args, start.config, splits.task_type, splits.label_names, training_args)
    initialization = None
    if start is not None and start.teacher is not None:
        initialization = initialize_student(
            model,
            start.teacher,
            model_args.layer_map,
            start.statistics,
            start.calibration,
            training_args.seed,
            start.name,
        )
    rebalanced = None
    if start is not None and start.router_calibration is not None:
        rebalanced = rebalance_routers(model, start.router_calibration)
        print(
            "Routers re-balanced on the training text (largest expert share per block, before -> after): "
            + ", ".join(
                f"{entry['max_expert_share_before']:.2f} -> {entry['max_expert_share_after']:.2f}"
                for entry in rebalanced
            )
        )
    if model_args.peft:
        model = with_peft_adapter(model, model_args, splits.task_type)
    train, validation = tokenized
    has_eval = validation is not None
    callbacks = []
    early_stopping = None
    if has_eval and training_args.early_stopping_patience:
        early_stopping = ReportingEarlyStopping(early_stopping_patience=training_args.early_stopping_patience)
        callbacks.append(early_stopping)
    trainer_class = TaskDistillationTrainer if model_args.teacher else FinetuneTrainer
    teacher = {"teacher": start.task_teacher} if model_args.teacher else {}
    trainer = trainer_class(
        **teacher,
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=validation,
        data_collator=data_collator,
        processing_class=tokenizer,
        callbacks=callbacks,
        compute_metrics=build_compute_metrics(
            splits.task_type, splits.label_names, data_args.task_name if data_args.glue_task else None
        )
        if has_eval
        else None,
    )
    summary = train_and_report(
        trainer,
        tokenizer,
        training_args,
        {
            "model_name_or_path": model_args.model_name_or_path,
            "model_type": model.config.model_type,
            "task_type": splits.task_type,
            "task_name": data_args.task_name,
            "label_names": splits.label_names,
            "seed": training_args.seed,
            "learning_rate": training_args.learning_rate,
            "data": dataclasses.asdict(data_args),
            **({"adapter_size": model_args.peft_r} if model_args.peft == "lora" else {}),
            **({"teacher_initialization": initialization} if initialization else {}),
            **({"task_distillation": start.distillation} if start is not None and start.distillation else {}),
            **({"rebalanced_routers": rebalanced} if rebalanced else {}),
            **({"depth_by_latency_budget": start.depth_choice} if start is not None and start.depth_choice else {}),
            **({"reported_checkpoint": reported_checkpoint(training_args)} if has_eval else {}),
        },
    )
    if early_stopping is not None and early_stopping.stop is not None:
        summary["stopped_early"] = early_stopping.stop
    warning = single_class_warning(summary)
    if warning:
        print(f"WARNING: {warning}")
        summary["single_class_predictions"] = True
    if (early_stopping is not None and early_stopping.stop) or warning:
        write_summary_and_card(training_args.output_dir, summary)
    trainer.save_state()  # trainer_state.json: the logged loss terms of every step, next to the model
    if model_args.merge and trainer.is_world_process_zero():
        summary["merged_model_dir"] = save_merged(trainer.model, tokenizer, Path(training_args.output_dir) / "merged")
        write_summary_and_card(training_args.output_dir, summary)
    return summary


def with_peft_adapter(model, model_args: FinetuneModelArguments, task_type: str):
    """The model wrapped with a trainable PEFT adapter (plus its task head) built by ``finetuning.peft_support``."""
    try:
        import peft

        from ..finetuning.peft_support import build_peft_config  # imported at use: PEFT is needed only here
    except ImportError as error:
        raise SystemExit(f"--peft needs PEFT support, which this installation lacks: {error}") from None
    targets = (
        [name.strip() for name in model_args.peft_target_modules.split(",")]
        if model_args.peft_target_modules
        else None
    )
    try:
        config = build_peft_config(
            model_args.peft,
            model,
            "TOKEN_CLS" if task_type == "ner" else "SEQ_CLS",
            r=model_args.peft_r,
            alpha=model_args.peft_alpha,
            dropout=model_args.peft_dropout,
            target_modules=targets,
        )
        return peft.get_peft_model(model, config)
    except ValueError as error:
        raise SystemExit(f"--peft {model_args.peft}: {error}") from None


def save_merged(peft_model, tokenizer, folder: Path) -> str:
    """The adapter folded into the base weights, saved with the tokenizer as an ordinary model folder."""
    merged = peft_model.merge_and_unload()
    merged.save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    write_model_card(folder)
    return str(folder.resolve())


def _adjusted_training_args(training_args: FinetuneConfig, given: frozenset[str], metric: str, has_eval: bool):
    if not has_eval:
        return dataclasses.replace(
            training_args, eval_strategy="no", load_best_model_at_end=False, early_stopping_patience=None
        )
    if "--metric_for_best_model" in given:
        return training_args
    return dataclasses.replace(training_args, metric_for_best_model=metric, greater_is_better=True)


# The most training examples a run makes of its data (the originals, their copies and recombined pairs): a bound far
# above any measured recipe (a QQP-sized set, 364k pairs, with the recipe's 4 copies and 2 pairs is 2.5 million), that
# stops a mistyped count before it fills the memory in silence.
MAX_TRAINING_EXAMPLES = 10_000_000


def _check_training_set_size(examples: int, training_args: FinetuneConfig, unlabeled: int = 0) -> None:
    """Refuse, before anything is built, copies and recombined pairs that would make more than
    ``MAX_TRAINING_EXAMPLES`` training examples with the ``unlabeled`` ones, saying how many and what would fit."""
    per_example = 1 + (training_args.augment_copies or 0) + (training_args.augment_pair_recombined or 0)
    total = examples * per_example + unlabeled
    if examples + unlabeled > MAX_TRAINING_EXAMPLES:  # no number of copies would fit: the data itself is too large
        raise RunSettingsError(
            f"The training data ({examples:,} examples) and --unlabeled_file {training_args.unlabeled_file} "
            f"({unlabeled:,}) make more than the {MAX_TRAINING_EXAMPLES:,} examples a run makes: give a smaller "
            "--unlabeled_file, or --max_train_samples N."
        )
    if total > MAX_TRAINING_EXAMPLES:
        room = max(0, MAX_TRAINING_EXAMPLES - unlabeled)
        fitting = max(0, room // max(examples, 1) - 1 - (training_args.augment_pair_recombined or 0))
        raise RunSettingsError(
            f"--augment_copies {training_args.augment_copies} (and --augment_pair_recombined "
            f"{training_args.augment_pair_recombined or 0}) would make {total:,} training examples from {examples:,} "
            f"({per_example:,} each{f', and {unlabeled:,} unlabeled' if unlabeled else ''}), more than the "
            f"{MAX_TRAINING_EXAMPLES:,} a run makes; give --augment_copies "
            f"{fitting} or fewer."
        )


def _check_distillation_flags(model_args, training_args, given: frozenset[str], text_columns: tuple[str, ...]) -> None:
    """Flags that only act with a teacher, on augmented copies or on sentence pairs are refused where they would be
    ignored."""
    if training_args.augment_copies and not model_args.teacher:
        raise SystemExit(
            "--augment_copies: augmented examples are labelled by a teacher's predictions: give --teacher "
            "(a model fine-tuned on this task), or --augment_copies 0."
        )
    for flag in ("--distillation_alpha", "--distillation_temperature"):
        if flag in given and not model_args.teacher:
            raise SystemExit(
                f"{flag}: it weighs or softens a teacher's predictions, and no --teacher was given: add --teacher "
                f"FOLDER (a model fine-tuned on this task), or leave {flag} out."
            )
    needs_teacher = ("--distillation_hidden_weight", "--distillation_attention_weight", "--augment_word_neighbours")
    for flag in needs_teacher:
        if flag in given and getattr(training_args, flag[2:]) and not model_args.teacher:
            raise SystemExit(
                f"{flag}: it distills from a fine-tuned teacher, and none was given: add --teacher FOLDER, or leave "
                f"{flag} out."
            )
    if training_args.augment_word_neighbours and not training_args.augment_copies:
        raise SystemExit(
            f"--augment_word_neighbours {training_args.augment_word_neighbours}: words are replaced in the augmented "
            "copies, and --augment_copies is 0: give --augment_copies N (N > 0)."
        )
    if training_args.augment_pair_swap and not training_args.augment_copies:
        raise SystemExit(
            "--augment_pair_swap: the augmented copies of a pair trade places, and --augment_copies is 0: give "
            "--augment_copies N (N > 0), or leave --augment_pair_swap out."
        )
    if training_args.augment_pair_recombined and not model_args.teacher:
        raise SystemExit(
            f"--augment_pair_recombined {training_args.augment_pair_recombined}: recombined pairs are labelled by a "
            "teacher's predictions: give --teacher (a model fine-tuned on this task), or --augment_pair_recombined 0."
        )
    if training_args.augment_pair_recombined and len(text_columns) != 2:
        raise SystemExit(
            f"--augment_pair_recombined {training_args.augment_pair_recombined}: the task's text is one column "
            f"({', '.join(text_columns)}), not a sentence pair: leave --augment_pair_recombined out."
        )
    if training_args.augment_pair_swap and len(text_columns) != 2:
        raise SystemExit(
            f"--augment_pair_swap: the task's text is one column ({', '.join(text_columns)}), not a sentence pair: "
            "leave --augment_pair_swap out."
        )


def finetune(
    model_args: FinetuneModelArguments,
    data_args: FinetuneDataArguments,
    training_args: FinetuneConfig,
    given: frozenset[str] = frozenset(),
    model_config=None,
    narrowed: bool = False,
    depth_choice: dict | None = None,
) -> list[dict]:
    """Fine-tune (and evaluate) every run of the grid. ``given``: the flags the user set (``--name``), which tell a
    default from a choice (a flag that only acts with a teacher is refused without one; a metric the user chose is
    kept). ``model_config``: a preset's config that the caller has built already (the main job's student, whose
    depth it chose), used as it is; ``narrowed``: that config is a narrowed tiny student, which takes the tiny-student
    recipe's weight of the labels for its width (``task_recipe.distillation_alpha``) unless ``distillation_alpha`` is
    set; ``depth_choice``: the record of the latency budget that sized ``model_config``, kept in each run's summary
    (and so in its card) as when ``--max_latency_ratio`` sizes the preset here. Returns each run's summary; with
    several runs, ``output_dir/run_summary.json`` also holds the per-setting means and the best setting.

    Before anything is loaded, ``output_dir`` and every run folder of the grid are checked not to be an input nor to
    hold a model or a run already (``training/output_folders.py``; ``--overwrite_output_dir`` allows it)."""
    check_run_output(training_args, model_args, data_args, folders=_run_folders(model_args, training_args).values())
    if training_args.unlabeled_file and not model_args.teacher:
        raise SystemExit(
            f"--unlabeled_file {training_args.unlabeled_file}: unlabeled examples are labelled by a teacher's "
            "predictions: give --teacher (a model fine-tuned on this task), or leave --unlabeled_file out."
        )
    try:
        splits = load_finetuning_data(data_args)
        unlabeled = (
            load_unlabeled_examples(training_args.unlabeled_file, data_args, splits)
            if training_args.unlabeled_file
            else None
        )
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(str(error)) from None
    tokenizer = _load_tokenizer(model_args)
    teacher_config = _teacher_config(model_args)
    if model_config is None and model_args.max_latency_ratio is not None:
        depth_choice = _depth_by_latency_budget(model_args, teacher_config, bool(training_args.unlabeled_file))
        narrowed = bool(depth_choice["narrowed"])
        if narrowed and "--num_train_epochs" not in given:  # the tiny-student recipe's epochs
            training_args.num_train_epochs = narrowed_student_epochs(training_args.unlabeled_file is not None)
    config = _model_config(model_args, teacher_config) if model_config is None else model_config
    max_length = data_args.resolved_max_seq_length()
    if data_args.max_seq_length is None:  # the task's default, capped by the model's positions
        max_length = min(max_length, max_sequence_length(config))
    _check_fits(
        config, tokenizer, max_length, _teacher_folder(model_args) if model_args.tokenizer_name is None else None
    )
    # (before any run: fail in seconds, not epochs)
    if splits.validation is not None and "--metric_for_best_model" in given:
        check_metric_name(
            training_args.metric_for_best_model,
            splits.task_type,
            splits.label_names,
            data_args.task_name if data_args.glue_task else None,
        )
    train_split = splits.train
    if training_args.augment_copies is None:  # the task-distillation recipe's copies with a teacher, none without
        over_text = narrowed and training_args.unlabeled_file is not None
        training_args.augment_copies = student_augment_copies(over_text) if model_args.teacher else 0
    if training_args.augment_pair_recombined is None:  # the recipe's for a sentence pair with a teacher, else none
        pairs = len(splits.text_columns) == 2 and model_args.teacher
        training_args.augment_pair_recombined = AUGMENT_PAIR_RECOMBINED if pairs else 0
    if training_args.distillation_alpha is None:  # the recipe's, by task kind and, for a narrowed student, its width
        channels = config.hidden_size / teacher_config.hidden_size if narrowed and teacher_config else None
        training_args.distillation_alpha = recipe_distillation_alpha(splits.task_type, channels)
    _check_distillation_flags(model_args, training_args, given, splits.text_columns)
    _check_training_set_size(len(train_split), training_args, len(unlabeled) if unlabeled is not None else 0)
    task_teacher = None
    if model_args.teacher:  # before the copies: word replacement reads the teacher's word embeddings
        task_teacher = load_task_teacher(
            model_args.teacher, splits.task_type, splits.label_names, tokenizer, data_args.glue_task
        )
        if training_args.distillation_attention_weight > 0:
            try:
                check_attention_heads(config, task_teacher.config)
            except ValueError as error:
                raise RunSettingsError(f"--teacher {model_args.teacher}: {error}") from None
    if training_args.augment_copies:
        neighbours = (
            WordNeighbours.from_model(task_teacher, tokenizer, training_args.augment_word_neighbours)
            if training_args.augment_word_neighbours
            else None
        )
        train_split = augment_split(
            train_split,
            splits.text_columns,
            training_args.augment_copies,
            tokenizer.mask_token,
            training_args.augmentation_seed,
            tag_column="label" if splits.task_type == "ner" else None,
            pair_perturbation=training_args.augment_pair_sentences,
            neighbours=neighbours,
            pair_swap=training_args.augment_pair_swap,
        )
    if training_args.augment_pair_recombined:
        train_split = recombine_pairs(train_split, splits.text_columns, training_args.augment_pair_recombined)
    if unlabeled is not None:
        train_split = append_unlabeled(train_split, unlabeled)
    if splits.task_type == "ner":
        tokenized = [
            None if split is None else tokenize_token_dataset(split, tokenizer, max_length)
            for split in (train_split, splits.validation)
        ]
        data_collator = DataCollatorForTokenClassification(tokenizer)
    else:
        tokenized = [
            None if split is None else tokenize_sequence_dataset(split, tokenizer, splits.text_columns, max_length)
            for split in (train_split, splits.validation)
        ]
        data_collator = DataCollatorWithPadding(tokenizer)
    start = _StudentStart(config=config, depth_choice=depth_choice)
    if model_args.teacher:
        tokenized[0], cache = attach_teacher_logits(
            task_teacher,
            tokenized[0],
            tokenizer,
            data_collator,
            max_length,
            splits.task_type,
            training_args.teacher_cache_dir,
        )
        if AUGMENTED_COLUMN in train_split.column_names:
            tokenized[0] = label_augmented_examples(tokenized[0], train_split[AUGMENTED_COLUMN], splits.task_type)
        start.distillation = {
            "teacher": model_args.teacher,
            "alpha": training_args.distillation_alpha,
            "temperature": training_args.distillation_temperature,
            "hidden_weight": training_args.distillation_hidden_weight,
            "attention_weight": training_args.distillation_attention_weight,
            "augment_copies": training_args.augment_copies,
            "unlabeled_examples": len(unlabeled) if unlabeled is not None else 0,
            **({"unlabeled_file": training_args.unlabeled_file} if unlabeled is not None else {}),
            "augment_word_neighbours": training_args.augment_word_neighbours if training_args.augment_copies else 0,
            **(
                {
                    "augment_pair_sentences": training_args.augment_pair_sentences,
                    "augment_pair_swap": training_args.augment_pair_swap,
                    "augment_pair_recombined": training_args.augment_pair_recombined,
                }
                if len(splits.text_columns) == 2
                else {}
            ),
            "teacher_logits_cache": cache,
        }
        start.task_teacher = task_teacher
    _choose_initialization(model_args, config, start)
    if start.teacher is not None:  # a bad --layer_map fails here, before any run
        start.statistics, start.calibration = prepare_initialization(
            config, start.teacher, model_args.layer_map, tokenized[0], data_collator
        )
    if training_args.rebalance_routers:
        if not getattr(config, "is_sparse", False) or getattr(config, "router_type", "top1") == "hash":
            raise SystemExit(f"--rebalance_routers: {model_args.model_name_or_path} has no learned MoE router.")
        if model_args.peft and not model_args.merge:
            raise SystemExit(
                "--rebalance_routers with --peft: the adapter does not carry the shifted router biases "
                "(routers stay out of adapters), so it would load onto routing it was not trained with; "
                "add --merge true (the merged model carries them) or fine-tune without --peft."
            )
        # the batches teacher initialization measured, when it ran: the same first training examples
        start.router_calibration = start.calibration or calibration_batches(tokenized[0], data_collator)
    if model_args.teacher:
        data_collator = TeacherLogitsCollator(data_collator)
    metric = data_args.dev_metric()
    training_args = _adjusted_training_args(training_args, given, metric, tokenized[1] is not None)
    base = Path(training_args.output_dir)
    runs = []
    for (size, rate, seed), folder in _run_folders(model_args, training_args).items():
        run_model_args = dataclasses.replace(model_args, peft_r=size)
        run_args = dataclasses.replace(training_args, learning_rate=rate, seed=seed, output_dir=str(folder))
        runs.append(_run_one(run_model_args, data_args, run_args, splits, tokenized, tokenizer, data_collator, start))
    if len(runs) > 1 and training_args.should_save:
        key = f"eval_{metric}" if not metric.startswith("eval_") else metric
        summary = summarize_runs(
            runs, key if tokenized[1] is not None else "eval_loss", training_args.greater_is_better is not False
        )
        write_text_atomically(base / "run_summary.json", json.dumps(summary, indent=2) + "\n")
        print(json.dumps({name: summary[name] for name in ("metric_for_best_model", "best")}, indent=2))
    return runs


def _run_folders(model_args: FinetuneModelArguments, training_args: FinetuneConfig) -> dict[tuple, Path]:
    """The output folder of every run of the grid, by (LoRA rank, learning rate, seed):
    ``output_dir/[r-R/][lr-X/][seed-N]``, each level only where the grid varies it."""
    sizes = model_args.adapter_size_grid or [model_args.peft_r]
    rates = training_args.learning_rate_grid or [training_args.learning_rate]
    seeds = training_args.seeds or [training_args.seed]
    base = Path(training_args.output_dir)
    return {
        (size, rate, seed): base
        / (f"r-{size}" if len(sizes) > 1 else "")
        / (f"lr-{rate:g}" if len(rates) > 1 else "")
        / (f"seed-{seed}" if len(seeds) > 1 else "")
        for size in sizes
        for rate in rates
        for seed in seeds
    }


@dataclasses.dataclass
class _StudentStart:
    """What every run of a grid shares: the teacher that initializes a preset (and its activation statistics), the
    task teacher and the record of its cached logits."""

    config: object = None  # the model's config (for a preset: its teacher's architecture), built once
    teacher: object = None
    name: str | None = None
    statistics: object = None
    calibration: list | None = None
    task_teacher: object = None
    distillation: dict | None = None
    router_calibration: list | None = None  # --rebalance_routers: the first training batches
    depth_choice: dict | None = None  # --max_latency_ratio: the depth chosen, and why


def _depth_by_latency_budget(model_args: FinetuneModelArguments, teacher_config, unlabeled: bool = False) -> dict:
    """``--max_latency_ratio``: set the preset's depth (``model_args.model_overrides``) to the deepest that fits the
    budget against the teacher, measured here (``unlabeled``: a narrowed student takes the width for one that learns
    from text without labels); the record of the choice."""
    name = model_args.model_name_or_path
    if name not in PRESETS:
        raise SystemExit(
            f"--max_latency_ratio chooses a preset's depth: {name} is a trained model folder, whose depth is fixed."
        )
    teacher = model_args.teacher
    if teacher is None and model_args.init_from_teacher not in ("auto", "none"):
        teacher = model_args.init_from_teacher
    if teacher is None:
        raise SystemExit(
            "--max_latency_ratio is a share of a teacher's latency: give --teacher (or --init_from_teacher FOLDER)."
        )
    try:
        overrides, record = budgeted_overrides(
            _model_config(model_args, teacher_config),
            teacher,
            model_args.max_latency_ratio,
            model_args.model_overrides,
            "model_overrides",
            unlabeled=unlabeled,
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None
    model_args.model_overrides = overrides
    return record


def _choose_initialization(model_args: FinetuneModelArguments, config, start: _StudentStart) -> None:
    """Resolve ``--init_from_teacher`` for this model into ``start.teacher`` (``None``: random initialization)."""
    choice = model_args.init_from_teacher
    is_preset = model_args.model_name_or_path in PRESETS
    if choice == "none":
        return
    if choice == "auto":
        if not is_preset or start.task_teacher is None:
            return
        blocker = initialization_blocker(config, start.task_teacher)
        if blocker is not None:
            logger.warning("The preset starts from random weights, not from --teacher: %s", blocker)
            return
        start.teacher, start.name = start.task_teacher, model_args.teacher
        return
    if not is_preset:
        raise SystemExit(
            f"--init_from_teacher {choice}: only a preset is initialized from a teacher; "
            f"{model_args.model_name_or_path} is a trained model folder already."
        )
    try:
        teacher = load_encoder(choice)
    except (ValueError, OSError) as error:
        raise SystemExit(f"--init_from_teacher: {error}") from None
    blocker = initialization_blocker(config, teacher)
    if blocker is not None:
        raise SystemExit(f"--init_from_teacher {choice}: {blocker}")
    start.teacher, start.name = teacher, choice


def _model_config(model_args: FinetuneModelArguments, teacher_config=None):
    """The config of ``--model_name_or_path``: a folder's own, or a preset's with ``--model_overrides`` (a dense
    preset as ``teacher_config``'s architecture: ``configuration.dense_students``)."""
    name = model_args.model_name_or_path
    if name in PRESETS:
        try:
            return preset_config(name, teacher_config=teacher_config, **model_args.model_overrides)
        except ValueError as error:
            raise SystemExit(f"--model_overrides: {error}") from None
    if (Path(name) / "config.json").is_file():
        if model_args.model_overrides:
            raise SystemExit(
                f"--model_overrides applies to presets only: {name} is a model folder, whose weights fit "
                "its own config.json (start from a preset to change the shape, or drop --model_overrides)."
            )
        try:
            return AutoConfig.from_pretrained(name)
        except (OSError, ValueError, KeyError) as error:
            raise SystemExit(f"--model_name_or_path {name}: its config.json cannot be read: {error}") from None
    raise SystemExit(
        f"--model_name_or_path {name!r} is neither a model folder (with config.json) nor a preset "
        f"({', '.join(sorted(PRESETS))})."
    )
