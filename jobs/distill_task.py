"""The main job: task distillation of a small student from a fine-tuned teacher, compared with the teacher and the
layer-dropped baseline at the student's latency, then shipped.

``distill_task(TaskDistillationSpec(...)) -> TaskDistillationResult`` is the job; ``compact-bert distill task`` parses
its flags into the spec (each spec field is a flag) and prints the result. With the defaults, offline, on 2 CPU cores
in under 10 minutes: the packaged all-MiniLM-L6-v2 is fine-tuned on the bundled SST-2 slice (the teacher); the student
(the 3-layer MiniLM: docs/students.md says why this shape) starts from the fine-tuned teacher's layers and learns the
teacher's predictions on the slice and on perturbed copies of it, with the task-distillation recipe
(``finetuning/task_recipe.py``); the teacher with the student's depth of its layers is fine-tuned on the labels as
the baseline to beat. All three are scored on the full GLUE SST-2 dev set and timed side by side; the student is
exported to ONNX and int8, scored again, and gets its card (``jobs/task_comparison.py``, ``jobs/shipping.py``).

Only the task stage runs: no general distillation on a corpus (the relation distillation of paper 002 is
``jobs.distill_minimoe``): a student initialized from the fine-tuned teacher kept more of its accuracy than one
distilled on the corpus first (docs/students.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import transformers

from ..configuration import PRESETS, MiniMoEConfig, preset_config
from ..configuration.dense_students import is_dense_student
from ..distillation.data import PACKAGED_TEACHER
from ..distillation.teachers import resolve_model_path
from ..finetuning.bundled_data import bundled_sst2_files
from ..finetuning.depth_budget import budgeted_overrides, check_max_latency_ratio
from ..finetuning.task_distillation import has_task_head
from ..finetuning.task_recipe import AUGMENT_COPIES, NARROWED_STUDENT_EPOCHS, UNLABELED_STUDENT_EPOCHS
from ..modeling.model_stats import count_parameters, meta_model
from ..training.argument_checks import check_output_dir
from ..training.output_folders import check_output_folder, input_paths
from ..training.run_errors import RunSettingsError
from ..training.text_files import parse_json_object
from .finetune import FinetuneModelArguments
from .run_report import invoked_command_line, write_summary_and_card
from .shipping import ship_when_possible
from .task_comparison import comparison_runs, fine_tuned_teacher_head, run_comparison, time_comparison
from .task_settings import TaskTrainingSettings, sst2_data

__all__ = ["DEFAULT_STUDENT_PRESET", "TaskDistillationResult", "TaskDistillationSpec", "distill_task"]

# The main job's student, chosen by accuracy at <= 1.1x the dense student's latency (docs/students.md).
DEFAULT_STUDENT_PRESET = "minilm-3l-384h"


@dataclass
class TaskDistillationSpec(TaskTrainingSettings):
    """What the main job makes, from what, and where (the training settings: ``TaskTrainingSettings``)."""

    teacher: str = field(
        default=PACKAGED_TEACHER,
        metadata={
            "help": f"The teacher: a pretrained encoder folder (fine-tuned here), a classifier already fine-tuned on "
            f"the task's labels (used as it is), or '{PACKAGED_TEACHER}' (packaged, offline)."
        },
    )
    student_preset: str = field(
        default=DEFAULT_STUDENT_PRESET,
        metadata={
            "help": "Student preset (see `compact-bert presets`; a MiniLM or MiniMoE preset). The default, the "
            "3-layer MiniLM, is the most accurate student at <= 1.1x its own latency in eager PyTorch and ONNX "
            "Runtime on this CPU (docs/students.md)."
        },
    )
    student_overrides: dict | str | None = field(
        default_factory=dict,
        metadata={"help": "JSON object of student config fields, e.g. '{\"num_experts\": 8}'."},
    )
    init_from_teacher: str = field(
        default="auto",
        metadata={
            "help": "'auto': the student starts from the fine-tuned teacher wherever the shapes allow (layer map, "
            "importance-ranked width, upcycled or split experts; distillation/teacher_init.py); 'none': random."
        },
    )
    layer_map: str = field(
        default="uniform",
        metadata={
            "help": "0-based teacher layer of each student layer ('1,3,5'), or 'uniform' (evenly spaced, ending at "
            "the teacher's last layer)."
        },
    )
    max_latency_ratio: float | None = field(
        default=None,
        metadata={
            "help": "Instead of the preset's depth: the deepest student whose latency is at most this share of the "
            "teacher's, measured on this machine before training (batch 1 x 128, the same inference path; "
            "finetuning/depth_budget.py), e.g. 0.5; where no whole student half the teacher's depth fits, that "
            "depth narrowed: with unlabeled sentences (--unlabeled_file, or the bundled ones by default) 3 layers "
            "of 256 channels, 8 heads and 512 FFN neurons taught over the slice and those sentences, "
            f"{UNLABELED_STUDENT_EPOCHS:g} epochs, on the teacher's soft targets alone; without, the widest residual "
            "stream that fits (0.3: 320 channels, 10 heads and 640 FFN neurons, else 320 / 10 / 448, else 288 / 9 / "
            f"576, else 256 / 8 / 768) over copies, {NARROWED_STUDENT_EPOCHS:g} epochs, at 288 or 256 channels on "
            "the soft targets alone. Epochs unless --num_train_epochs is given; the baseline gets the same shape "
            "and epochs."
        },
    )
    augment_copies: int | None = field(
        default=None,
        metadata={
            "help": "Perturbed copies of every training sentence that the fine-tuned teacher labels for the student "
            f"(Tang et al. 2019); 0: the training sentences alone. Default: the recipe's {AUGMENT_COPIES}, none for "
            "a tiny student that --max_latency_ratio narrowed and that learns from unlabeled sentences instead."
        },
    )
    unlabeled_file: str | None = field(
        default=None,
        metadata={
            "help": "In-domain sentences without labels (header sentence; a label column is ignored) that the teacher "
            "labels for the student, beside the copies; a tiny student that --max_latency_ratio narrowed learns from "
            "them instead of copies. Default: where --max_latency_ratio narrows the dense student on the bundled "
            "slice, the 6,000 bundled GLUE SST-2 train sentences outside the slice; otherwise none."
        },
    )
    train_file: str | None = field(
        default=None,
        metadata={
            "help": "SST-2 training data (header sentence<TAB>label); default: the bundled 3,000-sentence slice of "
            "GLUE SST-2 train. The full set: ../shared/data/sst2/train.tsv."
        },
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "Dev data; default: the bundled GLUE SST-2 dev set (872 sentences, complete)."}
    )
    output_dir: str = field(
        default="outputs/task-student",
        metadata={"help": "The run summary's folder; the models go to <output_dir>-{teacher,baseline}-sst2, -sst2."},
    )
    student_output_dir: str | None = field(
        default=None, metadata={"help": "The student classifier's folder (default: <output_dir>-sst2)."}
    )
    export_onnx: bool = field(
        default=True,
        metadata={
            "help": "Export the student to ONNX + int8 (<folder>/onnx), score both, time eager / ONNX / int8 beside "
            "the teacher and the baseline, write latency.json and the card. Needs the `export` extra."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.student_overrides is None:
            self.student_overrides = {}
        if isinstance(self.student_overrides, str):
            self.student_overrides = parse_json_object(self.student_overrides, "student_overrides")
        if self.student_preset not in PRESETS:
            raise ValueError(
                f"--student_preset {self.student_preset!r} is unknown; valid presets: {', '.join(sorted(PRESETS))}."
            )
        if self.max_latency_ratio is not None:
            check_max_latency_ratio(self.max_latency_ratio)
        if self.augment_copies is not None and self.augment_copies < 0:
            raise ValueError(f"--augment_copies must be >= 0, got {self.augment_copies}.")
        for name in ("train_file", "validation_file", "unlabeled_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"--{name} {path} does not exist or is not a file.")

    def folders(self) -> dict[str, str]:
        """Each model's output folder."""
        base = str(self.output_dir).rstrip("/")
        return {
            "teacher": f"{base}-teacher-sst2",
            "baseline": f"{base}-baseline-sst2",
            "student": self.student_output_dir or f"{base}-sst2",
        }


@dataclass
class TaskDistillationResult:
    """What the job made: ``summary`` is its ``run_summary.json``; the properties are its headline numbers."""

    summary: dict

    @property
    def student_dir(self) -> Path:
        return Path(self.summary["finetune_output_dir"])

    @property
    def accuracy(self) -> dict[str, float]:
        """SST-2 dev accuracy of the teacher, the baseline and the student."""
        return dict(self.summary["comparison"]["sst2_accuracy"])

    @property
    def share_of_teacher_kept(self) -> dict[str, float]:
        return dict(self.summary["comparison"]["share_of_teacher_kept"])

    @property
    def latency_ms(self) -> dict[str, float]:
        """Median latency of each model and runtime (empty without the export)."""
        return dict(self.summary["comparison"].get("latency_ms", {}))


def _unlabeled_file(spec: TaskDistillationSpec) -> str | None:
    """The unlabeled sentences a narrowed tiny student learns from: ``--unlabeled_file``, else with a latency budget
    on the bundled slice the bundled sentences outside it."""
    if spec.unlabeled_file is not None:
        return spec.unlabeled_file
    if spec.max_latency_ratio is not None and spec.train_file is None:
        return str(bundled_sst2_files()["unlabeled"])
    return None


def _check_unlabeled_file(path: str, data_args) -> None:
    """``--unlabeled_file`` read whole before anything is timed or trained: the student, the last model to train,
    would otherwise find a bad line after the teacher and the baseline had trained."""
    from ..finetuning.data import load_finetuning_data, load_unlabeled_examples

    try:
        load_unlabeled_examples(path, data_args, load_finetuning_data(data_args))
    except (ValueError, FileNotFoundError) as error:
        raise RunSettingsError(str(error)) from None


def _student_config(spec: TaskDistillationSpec, teacher_config) -> tuple[object, dict, dict | None]:
    """The student's config (the teacher's architecture for a dense one), with the shape the latency budget chose;
    the preset's overrides that make it, and the record of that choice."""

    def build(overrides: dict):
        try:
            return preset_config(spec.student_preset, teacher_config=teacher_config, **overrides)
        except ValueError as error:
            raise RunSettingsError(f"--student_overrides: {error}") from None

    config = build(spec.student_overrides)
    if not isinstance(config, MiniMoEConfig) and not is_dense_student(config):
        raise RunSettingsError(f"--student_preset {spec.student_preset!r} is not a MiniMoE/MiniLM preset.")
    if spec.max_latency_ratio is None:
        return config, dict(spec.student_overrides), None
    try:
        overrides, record = budgeted_overrides(
            config,
            spec.teacher,
            spec.max_latency_ratio,
            spec.student_overrides,
            "student_overrides",
            unlabeled=_unlabeled_file(spec) is not None,
        )
    except ValueError as error:
        raise RunSettingsError(str(error)) from None
    return build(overrides), overrides, record


def _check_output_folders(spec: TaskDistillationSpec, teacher_path: str) -> None:
    """Every folder the job writes — the summary's and each model's — is refused before anything is loaded or trained
    when it is an input (the teacher, the data), lies inside one, or holds a model or a run already (e.g. this job's
    earlier run into the same ``--output_dir``), unless ``--overwrite_output_dir`` (``training/output_folders.py``).
    The teacher's folder is written only for a teacher that is fine-tuned here (not for a given classifier)."""
    inputs = {**input_paths(spec), "--teacher": teacher_path}
    folders = spec.folders()
    writes_teacher = not has_task_head(teacher_path, "classification")
    named = {
        "summary": (spec.output_dir, "--output_dir", None),
        "teacher": (folders["teacher"], "--output_dir", "the fine-tuned teacher's folder") if writes_teacher else None,
        "baseline": (folders["baseline"], "--output_dir", "the baseline's folder"),
        "student": (folders["student"], "--student_output_dir", None)
        if spec.student_output_dir
        else (folders["student"], "--output_dir", "the student's folder"),
    }
    for role, entry in named.items():
        if entry is None:
            continue
        folder, flag, name = entry
        readers = {**inputs, "fine-tuned teacher's folder": folders["teacher"]} if role == "student" else inputs
        check_output_folder(folder, flag, readers, spec.overwrite_output_dir, name=name, resume_flag=None)


def distill_task(spec: TaskDistillationSpec) -> TaskDistillationResult:
    """Run the main job (module docstring): every setting is checked and every output folder made writable (and refused
    when it would replace an input, a model or a run: ``_check_output_folders``) before anything trains; returns the job's summary, also written to ``<output_dir>/run_summary.json``."""
    transformers.set_seed(spec.seed)
    try:
        teacher_path = str(resolve_model_path(spec.teacher))
        teacher_config = transformers.AutoConfig.from_pretrained(teacher_path)
    except (OSError, ValueError) as error:
        raise RunSettingsError(f"--teacher {spec.teacher}: {error}") from None
    data_args = sst2_data(spec, spec.train_file, spec.validation_file)
    if spec.unlabeled_file is not None:
        _check_unlabeled_file(spec.unlabeled_file, data_args)
    _check_output_folders(spec, teacher_path)
    check_output_dir(spec.output_dir, "output_dir")
    student_config, student_overrides, depth_choice = _student_config(spec, teacher_config)
    reused_teacher = fine_tuned_teacher_head(teacher_path, data_args)
    folders = spec.folders()
    check_output_dir(folders["student"], "student_output_dir" if spec.student_output_dir else "output_dir")
    if reused_teacher is not None:
        folders["teacher"] = teacher_path
    student = FinetuneModelArguments(
        model_name_or_path=spec.student_preset,
        model_overrides={**student_overrides, "num_hidden_layers": student_config.num_hidden_layers},
        init_from_teacher=spec.init_from_teacher,
        layer_map=spec.layer_map,
    )
    runs = comparison_runs(
        student,
        student_config,
        teacher_path,
        teacher_config,
        folders,
        spec,
        spec.augment_copies,
        teacher_is_fine_tuned=reused_teacher is not None,
        teacher_name=spec.teacher,
        # a narrowed student learns from the unlabeled sentences (the bundled ones by default); a whole-width one
        # only from those the user gave
        unlabeled_file=_unlabeled_file(spec) if depth_choice and depth_choice["narrowed"] else spec.unlabeled_file,
    )
    runs["student"].depth_choice = depth_choice  # its card says the budget sized it
    if is_dense_student(student_config):  # and the baseline's, which has the shape the budget timed
        runs["baseline"].depth_choice = depth_choice
    summary = {
        "output_dir": str(Path(spec.output_dir).resolve()),
        "role": "main job",
        "teacher": spec.teacher,
        "student_preset": spec.student_preset,
        "command_line": invoked_command_line(),
        **({"depth_by_latency_budget": depth_choice} if depth_choice else {}),
    }
    summary.update(run_comparison(runs, data_args, reused_teacher))
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
    if spec.export_onnx and ship_when_possible(summary):
        summary["comparison"]["latency_ms"] = time_comparison(summary)
    write_summary_and_card(summary["output_dir"], summary)
    return TaskDistillationResult(summary)
