"""Relation distillation (paper 002): MiniLMv2 self-attention relation distillation of a MiniMoE (or dense MiniLM)
student from a BERT-like teacher, optionally through a teacher assistant, then — optionally — the student fine-tuned
on the bundled SST-2 slice and scored on the GLUE SST-2 dev set.

``distill_minimoe(student, corpus, training, labels_step)`` is the job (``compact-bert distill minimoe``). The main
job — task distillation from a fine-tuned teacher, compared with the teacher and the layer-dropped baseline — is
``jobs.distill_task``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import transformers

from ..configuration import MiniMoEConfig
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
from ..distillation.relation_kernels import check_relation_kernel_environment, relation_kernel_record
from ..distillation.teacher_init_runner import start_from_teacher
from ..distillation.teachers import load_encoder
from ..distillation.trainer_utils import prepare_block_datasets
from ..model_cards.load_calls import load_call
from ..modeling.model_stats import count_parameters
from ..training.argument_checks import check_output_dir_creatable
from ..training.compat import FROM_PRETRAINED_KWARGS
from ..training.output_folders import check_output_folder, check_run_output, input_paths
from ..training.run_errors import RunSettingsError
from ..training.text_files import parse_json_object
from .finetune import FinetuneModelArguments, finetune
from .model_building import build_from_preset
from .run_report import train_and_report, write_summary_and_card
from .shipping import print_shipping_summary, ship_when_possible
from .task_settings import TaskTrainingSettings, finetune_config, sst2_data

__all__ = ["LabelsStepArguments", "MiniMoEStudentArguments", "distill_minimoe"]

# The run settings the labels step takes from the distillation's arguments unless --finetune_settings sets them.
INHERITED_SETTINGS = (
    "seed",
    "use_cpu",
    "disable_tqdm",
    "dataloader_num_workers",
    "keep_checkpoints",
    "report_to",
    "overwrite_output_dir",
)


@dataclass
class MiniMoEStudentArguments:
    """The student, the teacher it learns from and starts from, and the optional teacher assistant."""

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
class LabelsStepArguments:
    """After distillation: the student fine-tuned on SST-2's labels and scored on its dev set."""

    finetune: bool = field(
        default=True, metadata={"help": "Fine-tune the distilled student on SST-2 and report its dev accuracy."}
    )
    finetune_train_file: str | None = field(
        default=None,
        metadata={"help": "SST-2 training data (header sentence<TAB>label); default: the bundled slice."},
    )
    finetune_validation_file: str | None = field(
        default=None, metadata={"help": "Dev data; default: the bundled GLUE SST-2 dev set (872 sentences, complete)."}
    )
    finetune_output_dir: str | None = field(
        default=None, metadata={"help": "Where the fine-tuned student goes; default: <output_dir>-sst2."}
    )
    finetune_settings: dict | str | None = field(
        default_factory=dict,
        metadata={
            "help": "JSON object of the fine-tuning's training settings (the main job's: 3 epochs, batch 32, 64 "
            "tokens, learning rate 1e-4 as labels_learning_rate), e.g. '{\"num_train_epochs\": 4}'. The seed, "
            "device, progress bars, data workers, checkpoints, logging and --overwrite_output_dir follow the "
            "distillation's flags."
        },
    )
    export_onnx: bool = field(
        default=True,
        metadata={"help": "Export the fine-tuned student to ONNX + int8, score and time it (the `export` extra)."},
    )

    def __post_init__(self):
        if self.finetune_settings is None:
            self.finetune_settings = {}
        if isinstance(self.finetune_settings, str):
            self.finetune_settings = parse_json_object(self.finetune_settings, "finetune_settings")
        known = {item.name for item in dataclasses.fields(TaskTrainingSettings)}
        unknown = sorted(set(self.finetune_settings) - known)
        if unknown:
            raise ValueError(
                f"--finetune_settings: {', '.join(unknown)} is not a setting of the fine-tuning; valid: "
                f"{', '.join(sorted(known))}."
            )
        for name in ("finetune_train_file", "finetune_validation_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"--{name} {path} does not exist or is not a file.")

    def output_dir(self, student_dir: str) -> str:
        return self.finetune_output_dir or f"{str(student_dir).rstrip('/')}-sst2"

    def settings(self, training_args) -> TaskTrainingSettings:
        """The fine-tuning's settings: ``--finetune_settings``, the distillation's run settings, the recipe's."""
        inherited = {name: getattr(training_args, name) for name in INHERITED_SETTINGS}
        try:
            return TaskTrainingSettings(**{**inherited, **self.finetune_settings})
        except (TypeError, ValueError) as error:
            raise RunSettingsError(f"--finetune_settings: {error}") from None


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


def _fine_tune_on_labels(student_dir: str, labels: LabelsStepArguments, settings: TaskTrainingSettings) -> dict:
    """The distilled student fine-tuned on the labels alone; the summary fields the job adds."""
    start = time.perf_counter()
    output_dir = labels.output_dir(student_dir)
    data_args = sst2_data(settings, labels.finetune_train_file, labels.finetune_validation_file)
    training = finetune_config(settings, output_dir, settings.labels_learning_rate)
    transformers.set_seed(settings.seed)
    run = finetune(FinetuneModelArguments(model_name_or_path=student_dir), data_args, training)[0]
    return {
        "sst2_eval_accuracy": run.get("eval_accuracy"),
        "finetune_seconds": round(time.perf_counter() - start, 1),
        "finetune_output_dir": str(Path(output_dir).resolve()),
        "finetune_load_with": load_call("transformers.AutoModelForSequenceClassification.from_pretrained", output_dir),
        "finetune_runs": 1,
        "finetune_train_file": data_args.train_file,
        "finetune_validation_file": data_args.validation_file,
        "finetune_max_eval_samples": data_args.max_eval_samples,
        "finetune_max_seq_length": data_args.max_seq_length,
    }


def distill_minimoe(
    student_args: MiniMoEStudentArguments,
    corpus: CorpusArguments,
    training_args: MiniMoEDistillationConfig,
    labels: LabelsStepArguments | None = None,
) -> dict:
    """Distill the student (through the assistant, if any) on ``corpus``; with ``labels.finetune``, fine-tune it on
    SST-2 and ship it. Returns the student's run summary. Both output folders are checked first: neither may be an
    input or hold a model or a run already, unless ``--overwrite_output_dir`` (``training/output_folders.py``)."""
    labels = labels or LabelsStepArguments(finetune=False)
    try:
        check_relation_kernel_environment()
    except ValueError as error:
        raise RunSettingsError(str(error)) from None
    check_run_output(training_args, student_args, corpus, labels)
    settings = None
    if labels.finetune:  # bad settings and folders fail before distilling
        settings = labels.settings(training_args)
        finetune_dir = labels.output_dir(training_args.output_dir)
        inputs = {
            **input_paths(student_args, corpus, labels),
            "distilled student's --output_dir": training_args.output_dir,
        }
        check_output_folder(
            finetune_dir,
            "--finetune_output_dir" if labels.finetune_output_dir else "--output_dir",
            inputs,
            training_args.overwrite_output_dir,
            name=None if labels.finetune_output_dir else "the fine-tuned student's folder",
            resume_flag=None,
        )
        check_output_dir_creatable(finetune_dir, "finetune_output_dir")
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
        teacher = _teacher_assistant(student_args, teacher, training_args, datasets, collator, tokenizer, corpus)
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
            "relation_kernel": relation_kernel_record(training_args.device),
            **({"teacher_initialization": initialization} if initialization else {}),
        },
    )
    if settings is None:
        return summary
    summary.update(_fine_tune_on_labels(summary["output_dir"], labels, settings))
    shipped = training_args.should_save and labels.export_onnx and ship_when_possible(summary)
    if training_args.should_save:
        write_summary_and_card(summary["output_dir"], summary)
    if shipped:
        print_shipping_summary(summary)
    return summary


def _teacher_assistant(student_args, teacher, training_args, datasets, collator, tokenizer, corpus):
    """The assistant distilled from the teacher (or loaded, when an earlier run finished it): the student's
    teacher."""
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
            {
                "role": "teacher_assistant",
                "teacher": student_args.teacher,
                "data": dataclasses.asdict(corpus),
                "relation_kernel": relation_kernel_record(training_args.device),
            },
        )
    return transformers.AutoModel.from_pretrained(assistant_dir, **FROM_PRETRAINED_KWARGS)
