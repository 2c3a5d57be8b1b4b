"""``compact-bert distill minimoe``: MiniLMv2 relation distillation into a MiniMoE student (paper 002).

With no arguments it distills a MiniMoE 4L;192H student (4 experts) from the packaged all-MiniLM-L6-v2 on
the bundled WikiText-2 slice in a few minutes on 2 CPU cores, saves a Hub-ready folder, then fine-tunes that
student on the bundled SST-2 slice with ``compact-bert finetune``'s own code and reports its accuracy on the
GLUE SST-2 dev set (``--finetune false`` stops after distillation).

The main job — task distillation from a fine-tuned teacher with the comparison against the teacher and the
layer-dropped baseline — is ``compact-bert distill task`` (``distill_task_command``), which reuses this module's
task stage (``main_job``, ``ship_and_report``); ``--compare true`` here runs the same job.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import transformers

from ..configuration import PRESETS, MiniMoEConfig, preset_config
from ..configuration.dense_students import is_dense_student
from ..distillation.data import (
    PACKAGED_TEACHER,
    CorpusArguments,
    PretrainingCollator,
    check_model_compatibility,
    default_tokenizer,
)
from ..distillation.minimoe_config import MiniMoEDistillationConfig
from ..distillation.minimoe_trainer import MiniMoEDistillationTrainer
from ..distillation.relation_kernels import check_relation_kernel_environment
from ..distillation.teacher_init_runner import start_from_teacher
from ..distillation.teachers import load_encoder
from ..distillation.trainer_utils import prepare_block_datasets
from ..finetuning.bundled_data import bundled_sst2_files
from ..finetuning.task_recipe import AUGMENT_COPIES, LEARNING_RATE
from ..jobs.finetune import finetune
from ..jobs.run_report import invoked_command_line, train_and_report, write_summary_and_card
from ..model_cards.load_calls import load_call
from ..modeling.model_stats import count_parameters, meta_model
from ..training.compat import FROM_PRETRAINED_KWARGS
from ..training.run_errors import RunSettingsError
from ..training.text_files import parse_json_object
from . import finetune_command
from .main_job_comparison import COMPARISON_FLAGS, comparison_table, inherited_flags, run_comparison, time_comparison
from .main_job_shipping import print_shipping_summary, ship_when_possible
from .training_common import build_from_preset, given_flags, parse_arguments

__all__ = [
    "MainJobFinetuneArguments",
    "MiniMoEStudentArguments",
    "StudentArguments",
    "TaskStageArguments",
    "finetune_arguments",
    "main_job",
    "parse_finetune_step",
    "run",
    "ship_and_report",
]

DESCRIPTION = (
    "Distill a MiniMoE student (mixture of minimal top-1 experts) from a BERT-like teacher with MiniLMv2 "
    f"self-attention relation distillation (paper 002). Defaults: teacher {PACKAGED_TEACHER} (packaged, offline), "
    "student preset minimoe-4l-192h, the bundled WikiText-2 slice. Optionally through a teacher assistant "
    "(teacher -> TA -> student). Then the student is fine-tuned on the bundled SST-2 slice and its SST-2 dev "
    "accuracy reported (--finetune false to skip). Every TrainingArguments flag is accepted (for distillation). "
    "The main job (task distillation from a fine-tuned teacher, compared with the teacher and the layer-dropped "
    "baseline) is `compact-bert distill task`."
)


@dataclass
class StudentArguments:
    """The student and the teacher it starts from: shared by ``distill minimoe`` and ``distill task``, which differ
    in the default preset only."""

    teacher: str = field(
        default=PACKAGED_TEACHER, metadata={"help": f"Teacher folder, or '{PACKAGED_TEACHER}' for the packaged one."}
    )
    student_preset: str = field(
        default="minimoe-4l-192h",
        metadata={
            "help": "Student preset (see `compact-bert presets`): a MiniMoE (m experts per FFN) or MiniLM (dense) "
            "preset. The default is paper 002's MiniMoE 4L;192H with 4 experts."
        },
    )
    student_overrides: str = field(
        default="{}",
        metadata={
            "help": 'JSON object of student config fields, e.g. \'{"num_experts": 8, "capacity_factor": 2.0}\'.'
        },
    )
    init_from_teacher: str = field(
        default="auto",
        metadata={
            "help": "'auto' (default): start the student from its teacher wherever the shapes allow (layer map, "
            "importance-ranked width, upcycled or split experts, balanced routers; distillation/teacher_init.py); "
            "'none': random initialization."
        },
    )
    layer_map: str = field(
        default="uniform",
        metadata={
            "help": "With --init_from_teacher: 0-based teacher layer of each student layer ('1,3,5'), or "
            "'uniform' (evenly spaced, ending at the teacher's last layer)."
        },
    )


@dataclass
class MiniMoEStudentArguments(StudentArguments):
    teacher_assistant_preset: str | None = field(
        default=None, metadata={"help": "Distill this preset from the teacher first, then the student from it."}
    )
    teacher_assistant_overrides: str = field(default="{}", metadata={"help": "JSON config fields of the assistant."})
    teacher_assistant_max_steps: int | None = field(
        default=None, metadata={"help": "Optimizer steps of the assistant (default: --max_steps)."}
    )

    def __post_init__(self):
        if self.teacher_assistant_max_steps is not None and self.teacher_assistant_max_steps < 1:
            raise ValueError(
                f"--teacher_assistant_max_steps must be >= 1 or unset, got {self.teacher_assistant_max_steps}."
            )


@dataclass
class TaskStageArguments:
    """The task stage: ``compact-bert finetune`` of the student on SST-2, then its export and card."""

    finetune_train_file: str | None = field(
        default=None,
        metadata={
            "help": "SST-2 training data (header sentence<TAB>label); default: the bundled 3,000-sentence "
            "slice of GLUE SST-2 train. The full set: ../shared/data/sst2/train.tsv."
        },
    )
    finetune_validation_file: str | None = field(
        default=None, metadata={"help": "Dev data; default: the bundled GLUE SST-2 dev set (872 sentences, complete)."}
    )
    finetune_output_dir: str | None = field(
        default=None,
        metadata={
            "help": "Where the fine-tuned student goes; default: <output_dir>-sst2 (the teacher and the baseline "
            "go to <output_dir>-teacher-sst2 and <output_dir>-baseline-sst2)."
        },
    )
    augment_copies: int = field(
        default=AUGMENT_COPIES,
        metadata={
            "help": "Task distillation of the student: perturbed copies of every training sentence that the "
            "fine-tuned teacher labels (Tang et al. 2019; the task-distillation recipe's number, "
            "finetuning/task_recipe.py); 0 distills on the training sentences alone."
        },
    )
    export_onnx: bool = field(
        default=True,
        metadata={
            "help": "After fine-tuning: export the classifier to ONNX + dynamic int8 (into <folder>/onnx), "
            "measure their SST-2 accuracy and the latency of eager / ONNX / int8, write latency.json and the "
            "card, and list what `compact-bert push` would upload. Needs the `export` extra."
        },
    )
    finetune_args: str = field(
        default="",
        metadata={
            "help": "Further `compact-bert finetune` flags for every model of the task stage, which override the "
            f"main job's (3 epochs, batch 32, 64 tokens, learning rate 1e-4; the student's {LEARNING_RATE:g}), e.g. "
            "'--num_train_epochs 4'."
        },
    )


@dataclass
class MainJobFinetuneArguments(TaskStageArguments):
    """``distill minimoe``'s task stage after relation distillation: fine-tuning on the labels by default, or the
    main job's comparison (``--compare true``, what ``distill task`` runs)."""

    finetune: bool = field(
        default=True, metadata={"help": "Fine-tune the distilled student on SST-2 and report its dev accuracy."}
    )
    compare: bool = field(
        default=False,
        metadata={
            "help": "Instead of relation distillation, run the main job (`compact-bert distill task`): fine-tune the "
            "teacher, which teaches the student its task, and the layer-dropped baseline, and time all three side by "
            "side. 'false' (the default): fine-tune the relation-distilled student on the labels alone."
        },
    )


def _distill(teacher, student, training_args, datasets, collator, tokenizer, extra: dict) -> dict:
    """Distill ``student`` and save it; ``extra`` joins the run summary (role, teacher, data)."""
    train, held_out = datasets
    trainer = MiniMoEDistillationTrainer(
        model=student,
        teacher=teacher,
        args=training_args,
        train_dataset=train,
        eval_dataset=held_out,
        data_collator=collator,
        processing_class=tokenizer,
    )
    total, active = count_parameters(student)
    return train_and_report(
        trainer,
        tokenizer,
        training_args,
        {
            **extra,
            "student_total_params": total,
            "student_active_params_per_token": active,
            "load_with": load_call(
                "transformers.AutoModel.from_pretrained",
                training_args.output_dir,
                remote_code=bool(getattr(student.config, "auto_map", None)),
            ),
        },
    )


def split_finetune_args(text: str) -> list[str]:
    """``--finetune_args`` as a command line's words (shell quoting rules); a quote left open is named with the flag."""
    try:
        return shlex.split(text)
    except ValueError as error:
        raise RunSettingsError(
            f"--finetune_args {text!r}: {error} (the value is split as a shell would split it: close every quote)."
        ) from None


def finetune_arguments(student_dir: str, finetune_args: MainJobFinetuneArguments, training_args) -> list[str]:
    """The ``compact-bert finetune`` command line of the student's fine-tuning on the labels alone
    (``--compare false``)."""
    files = bundled_sst2_files()
    output_dir = finetune_args.finetune_output_dir or f"{str(training_args.output_dir).rstrip('/')}-sst2"
    return [
        "--model_name_or_path",
        student_dir,
        "--output_dir",
        output_dir,
        "--train_file",
        finetune_args.finetune_train_file or str(files["train"]),
        "--validation_file",
        finetune_args.finetune_validation_file or str(files["validation"]),
        *COMPARISON_FLAGS,
        *inherited_flags(training_args),
        *split_finetune_args(finetune_args.finetune_args),
    ]


def parse_finetune_step(student_dir: str, finetune_args: MainJobFinetuneArguments, training_args):
    """The fine-tuning step's command line and parsed arguments; bad --finetune_args fail here, and ``run`` calls
    this before distilling, so that they fail in seconds rather than after the distillation."""
    for flag in ("finetune_train_file", "finetune_validation_file"):
        path = getattr(finetune_args, flag)
        if path is not None and not Path(path).is_file():
            raise RunSettingsError(
                f"--{flag} {path} does not exist or is not a file (checked before distilling, so "
                "that the fine-tuning step cannot fail after it)."
            )
    argv = finetune_arguments(student_dir, finetune_args, training_args)
    if getattr(finetune_args, "compare", True):  # the main job's student is taught by its teacher
        argv = [*argv, "--augment_copies", str(finetune_args.augment_copies)]
    try:
        return argv, finetune_command.parse_finetune_arguments(argv)
    except ValueError as error:
        raise SystemExit(f"The fine-tuning step (--finetune_args, --finetune_*): {error}") from None


def _finetune_student(student_dir: str, finetune_args: MainJobFinetuneArguments, training_args) -> dict:
    """Fine-tune the student on the labels alone (``--compare false``); the summary fields the main job adds."""
    start = time.perf_counter()
    argv, (model_args, data_args, finetune_config) = parse_finetune_step(student_dir, finetune_args, training_args)
    runs = finetune(model_args, data_args, finetune_config, frozenset(given_flags(argv)))
    seconds = round(time.perf_counter() - start, 1)
    metric = data_args.dev_metric()
    metric_key = metric if metric.startswith("eval_") else f"eval_{metric}"
    scores = [run[metric_key] for run in runs if metric_key in run]
    return {
        f"{data_args.task_name or 'finetune'}_{metric_key}": round(sum(scores) / len(scores), 4) if scores else None,
        "finetune_seconds": seconds,
        "finetune_output_dir": str(Path(finetune_config.output_dir).resolve()),
        "finetune_load_with": load_call(
            "transformers.AutoModelForSequenceClassification.from_pretrained", finetune_config.output_dir
        ),
        "finetune_runs": len(runs),
        "finetune_train_file": data_args.train_file,
        "finetune_validation_file": data_args.validation_file,
        "finetune_max_eval_samples": data_args.max_eval_samples,
        "finetune_max_seq_length": data_args.resolved_max_seq_length(),
    }


def _depth_by_latency_budget(student_args, config):
    """``--max_latency_ratio``: the deepest student within the budget, measured here (``student_args``'s overrides
    updated to it); the record of the choice and the student's config."""
    from ..finetuning.depth_budget import budgeted_overrides

    try:
        overrides, record = budgeted_overrides(
            config,
            student_args.teacher,
            student_args.max_latency_ratio,
            parse_json_object(student_args.student_overrides, "student_overrides"),
            "student_overrides",
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None
    student_args.student_overrides = json.dumps(overrides)
    config.num_hidden_layers = overrides["num_hidden_layers"]
    return record, config


def main_job(student_args, finetune_args, training_args) -> dict:
    """The main job with the comparison (the default): the teacher fine-tuned on the task teaches a student that
    starts from its layers; no general distillation (a student initialized from the fine-tuned teacher kept more of
    its accuracy than one initialized from the pretrained teacher and distilled on the corpus first:
    docs/students.md). Returns the job's summary."""
    if student_args.student_preset not in PRESETS:
        raise SystemExit(
            f"Unknown --student_preset {student_args.student_preset!r}; valid presets: {', '.join(sorted(PRESETS))}."
        )
    try:
        config = preset_config(
            student_args.student_preset, **parse_json_object(student_args.student_overrides, "student_overrides")
        )
    except ValueError as error:
        raise SystemExit(f"--student_overrides: {error}") from None
    if not isinstance(config, MiniMoEConfig) and not is_dense_student(config):
        raise SystemExit(f"--student_preset {student_args.student_preset!r} is not a MiniMoE/MiniLM preset.")
    depth_choice = None
    if getattr(student_args, "max_latency_ratio", None) is not None:
        depth_choice, config = _depth_by_latency_budget(student_args, config)
    output_dir = str(training_args.output_dir).rstrip("/")
    student_flags = [
        "--model_overrides",
        student_args.student_overrides,
        "--init_from_teacher",
        "auto" if student_args.init_from_teacher == "auto" else "none",
        "--layer_map",
        student_args.layer_map,
        "--augment_copies",
        str(finetune_args.augment_copies),
    ]
    summary = {
        "output_dir": str(Path(output_dir).resolve()),
        "role": "main job",
        "teacher": student_args.teacher,
        "student_preset": student_args.student_preset,
        "command_line": invoked_command_line(),
        **({"depth_by_latency_budget": depth_choice} if depth_choice else {}),
    }
    summary.update(
        run_comparison(
            student_args.student_preset,
            student_args.teacher,
            output_dir,
            training_args,
            finetune_args.finetune_train_file,
            finetune_args.finetune_validation_file,
            student_flags,
            split_finetune_args(finetune_args.finetune_args),
            student_output_dir=finetune_args.finetune_output_dir,
            baseline_layers=config.num_hidden_layers,
        )
    )
    # Counted on the meta device from the config: loading the classifier folder's weights into a base model only to
    # count them would print transformers' report of the classifier weights it leaves out.
    config = transformers.AutoConfig.from_pretrained(summary["finetune_output_dir"])
    total, active = count_parameters(meta_model(config))
    summary.update(
        {
            "student_total_params": total,
            "student_active_params_per_token": active,
            "teacher_initialization": getattr(config, "teacher_initialization", None),
        }
    )
    return summary


def run(argv: list[str]) -> int:
    try:
        check_relation_kernel_environment()
    except ValueError as error:
        raise SystemExit(str(error)) from None
    student_args, finetune_args, corpus, training_args = parse_arguments(
        (MiniMoEStudentArguments, MainJobFinetuneArguments, CorpusArguments, MiniMoEDistillationConfig),
        argv,
        "compact-bert distill minimoe",
        DESCRIPTION,
    )
    if finetune_args.finetune:
        parse_finetune_step(training_args.output_dir, finetune_args, training_args)
    if finetune_args.finetune and finetune_args.compare:
        summary = main_job(student_args, finetune_args, training_args)
        ship_and_report(summary, finetune_args, training_args)
        return 0
    try:
        teacher = load_encoder(student_args.teacher)
    except (ValueError, OSError) as error:
        raise SystemExit(f"--teacher: {error}") from None
    tokenizer = default_tokenizer()
    transformers.set_seed(training_args.seed)  # the student's initial weights are part of the reproducible run
    student = build_from_preset(
        student_args.student_preset, student_args.student_overrides, "student_overrides", transformers.AutoModel
    )
    if not isinstance(student.config, MiniMoEConfig) and not is_dense_student(student.config):
        raise SystemExit(f"--student_preset {student_args.student_preset!r} is not a MiniMoE/MiniLM preset.")
    # Tokenized once for the whole chain (assistant and student read the same blocks).
    datasets = prepare_block_datasets(corpus, tokenizer, student.config, with_pairs=False)
    collator = PretrainingCollator(tokenizer, corpus.mlm_probability)
    if student_args.teacher_assistant_preset:
        assistant_dir = Path(training_args.output_dir) / "teacher_assistant"
        if not (assistant_dir / "run_summary.json").is_file():
            transformers.set_seed(training_args.seed)
            assistant = build_from_preset(
                student_args.teacher_assistant_preset,
                student_args.teacher_assistant_overrides,
                "teacher_assistant_overrides",
                transformers.AutoModel,
            )
            check_model_compatibility(assistant.config, tokenizer, corpus.block_size)
            start_from_teacher(
                assistant,
                teacher,
                student_args.teacher,
                student_args.init_from_teacher,
                "uniform",
                datasets[0],
                tokenizer,
                training_args.seed,
            )
            assistant_args = dataclasses.replace(
                training_args,
                output_dir=str(assistant_dir),
                max_steps=student_args.teacher_assistant_max_steps or training_args.max_steps,
            )
            _distill(
                teacher,
                assistant,
                assistant_args,
                datasets,
                collator,
                tokenizer,
                {"role": "teacher_assistant", "teacher": student_args.teacher, "data": dataclasses.asdict(corpus)},
            )
        teacher = transformers.AutoModel.from_pretrained(assistant_dir, **FROM_PRETRAINED_KWARGS)
    initialization = start_from_teacher(
        student,
        teacher,
        student_args.teacher,
        student_args.init_from_teacher,
        student_args.layer_map,
        datasets[0],
        tokenizer,
        training_args.seed,
    )
    summary = _distill(
        teacher,
        student,
        training_args,
        datasets,
        collator,
        tokenizer,
        {
            "role": "student",
            "teacher": student_args.teacher,
            "teacher_assistant": student_args.teacher_assistant_preset,
            "data": dataclasses.asdict(corpus),
            **({"teacher_initialization": initialization} if initialization else {}),
        },
    )
    if finetune_args.finetune:
        summary.update(_finetune_student(summary["output_dir"], finetune_args, training_args))
        ship_and_report(summary, finetune_args, training_args)
    return 0


def ship_and_report(summary: dict, finetune_args: MainJobFinetuneArguments, training_args) -> None:
    """Export, evaluate and time the fine-tuned student (and, with the comparison, time it against the teacher and
    the baseline); write the summary and card; print the closing tables."""
    # A grid of fine-tuning seeds leaves one folder per seed: there is no single classifier to ship.
    shipped = training_args.should_save and finetune_args.export_onnx and summary["finetune_runs"] == 1
    shipped = shipped and ship_when_possible(summary)
    if shipped and "comparison" in summary:
        summary["comparison"]["latency_ms"] = time_comparison(summary)
    if training_args.should_save:
        Path(summary["output_dir"]).mkdir(parents=True, exist_ok=True)
        write_summary_and_card(summary["output_dir"], summary)
    if shipped:
        print_shipping_summary(summary)
    if "comparison" in summary:
        print("\n" + comparison_table(summary))
