"""The main job's task stage: the teacher, the layer-dropped baseline and the student, trained and timed side by side.

A distilled student is worth shipping only if it beats what a user gets without the library. So the main job
fine-tunes three models on the same data with the same settings (the fine-tuning job, ``jobs.finetune``, each time;
the student at the task-distillation recipe's learning rate):

1. the **teacher** itself — the accuracy the student is measured against (a teacher that is already a classifier
   over the data's labels is scored as it is, never written);
2. the **baseline**: the pretrained teacher with the student's depth of its layers kept, evenly spaced (DistilBERT's
   initialization, no distillation), cut to a dense student's width by importance — a strong, free competitor at
   the student's cost;
3. the **student**: taught by the fine-tuned teacher (task distillation over the training set and its augmented
   copies, ``finetuning/task_distillation.py``).

Then ``time_comparison`` times the three side by side in one process (eager PyTorch; onnxruntime where installed)
and ``comparison_table`` prints the closing comparison: accuracy, share of the teacher's accuracy kept, latency.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import transformers

from ..configuration.dense_students import is_dense_student
from ..configuration.presets import minilm_fields_like
from ..configuration.shape_text import describe_width
from ..finetuning.data import FinetuneDataArguments
from ..finetuning.finetune_config import FinetuneConfig
from ..finetuning.folder_evaluation import evaluate_folder
from ..finetuning.task_recipe import student_augment_copies
from ..model_cards.load_calls import load_call
from ..training.run_errors import RunSettingsError
from .finetune import FinetuneModelArguments, finetune
from .task_settings import TaskTrainingSettings, finetune_config

__all__ = [
    "BASELINE_PRESET",
    "ComparisonRun",
    "compare_latency",
    "comparison_table",
    "run_comparison",
    "time_comparison",
]

# The baseline is a dense BERT of the teacher's width: this preset with the teacher's shape (``minilm_fields_like``).
BASELINE_PRESET = "minilm-3l-384h"
LATENCY_SEQUENCE_LENGTH = 128
LATENCY_ROUNDS = 20


@dataclass
class ComparisonRun:
    """One model of the comparison: what the fine-tuning job gets."""

    role: str
    model: FinetuneModelArguments
    training: FinetuneConfig | None  # None: a given classifier, scored as it is
    model_config: object = None  # the student's config, built once by the main job
    narrowed: bool = False  # a narrowed tiny student: the tiny-student recipe's weight of the labels for its width
    depth_choice: dict | None = None  # the latency budget's record when one sized model_config (for the card)

    teacher_name: str = ""  # the teacher as the user named it, for the progress line
    narrowed_width: str = (
        ""  # the baseline cut narrower than its teacher: ", 256 channels, 8 heads and 768 FFN neurons each"
    )

    def describe(self) -> str:
        """The line printed when the run starts: what trains, from what, how, into which folder."""
        model, training = self.model, self.training
        if self.role == "teacher":
            source = self.teacher_name
        elif self.role == "baseline":
            source = f"preset {model.model_name_or_path} with the layers of {self.teacher_name}"
        else:
            data = [f"{training.augment_copies} copies"] if training.augment_copies else []
            if training.unlabeled_file:
                data.append(f"the unlabeled sentences of {Path(training.unlabeled_file).name}")
            over = " and ".join(data) if data else "the training sentences alone"
            source = f"preset {model.model_name_or_path} taught by the fine-tuned teacher on {over}"
        length = f"{training.num_train_epochs:g} epochs" if training.max_steps < 1 else f"{training.max_steps} steps"
        return (
            f"the {self.role} ({source}; learning rate {training.learning_rate:g}, {length}) -> {training.output_dir}"
        )


def fine_tuned_teacher_head(teacher_path: str, data_args: FinetuneDataArguments) -> str | None:
    """The head name when ``teacher_path`` is already fine-tuned for the job's task (a sequence-classification head
    over the data's labels, in order), else ``None`` (a pretrained encoder, fine-tuned here). A classifier over other
    labels is refused: fine-tuning it again would silently replace its head."""
    from ..finetuning.data import load_finetuning_data
    from ..finetuning.task_distillation import check_task_head, has_task_head

    if not has_task_head(teacher_path, "classification"):
        return None
    splits = load_finetuning_data(data_args)
    try:
        config = check_task_head(teacher_path, splits.task_type, splits.label_names, data_args.glue_task)
    except RunSettingsError as error:
        raise SystemExit(
            f"{error} Give the pretrained encoder the classifier was made from (the job fine-tunes it), or a teacher "
            "fine-tuned on these labels."
        ) from None
    return next(name for name in config.architectures if name.endswith("ForSequenceClassification"))


def comparison_runs(
    student: FinetuneModelArguments,
    student_config,
    teacher_path: str,
    teacher_config,
    folders: dict[str, str],
    settings: TaskTrainingSettings,
    augment_copies: int | None,
    teacher_is_fine_tuned: bool,
    teacher_name: str = "",
    unlabeled_file: str | None = None,
) -> dict[str, ComparisonRun]:
    """The three runs (``folders``: each role's output folder; with ``teacher_is_fine_tuned``, ``folders["teacher"]``
    is the given classifier itself, which is scored, never written). The baseline keeps the student's depth of the
    teacher's layers, and a dense student's width (the most important channels, heads and FFN neurons): the same
    latency, without distillation. A narrowed student and its baseline train the tiny-student recipe's epochs
    (``task_recipe.NARROWED_STUDENT_EPOCHS``) unless ``settings`` sets them, and the student its weight of the labels
    (``task_recipe.distillation_alpha``). ``augment_copies``: the student's perturbed copies, ``None`` for the
    recipe's (``task_recipe.student_augment_copies``). ``unlabeled_file``: in-domain text without labels for the
    student's transfer set; a narrowed student learns from it instead of copies, for
    ``task_recipe.UNLABELED_STUDENT_EPOCHS`` (its baseline, on the labels, for as many). Building a run's arguments
    checks its output folder, before anything trains."""
    baseline_shape = minilm_fields_like(teacher_config, student_config.num_hidden_layers)
    width = ("hidden_size", "num_attention_heads", "intermediate_size")
    narrowed = is_dense_student(student_config) and any(
        getattr(student_config, name) != baseline_shape[name] for name in width
    )
    if narrowed:
        baseline_shape.update({name: getattr(student_config, name) for name in width})
    over_text = unlabeled_file is not None
    copies = student_augment_copies(narrowed and over_text) if augment_copies is None else augment_copies

    def run_config(role: str, learning_rate: float, **extra) -> FinetuneConfig:
        """The baseline's or the student's arguments: for a narrowed tiny student, its recipe's epochs for both."""
        return finetune_config(settings, folders[role], learning_rate, narrowed=narrowed, unlabeled=over_text, **extra)

    runs = {
        "teacher": ComparisonRun(
            "teacher",
            FinetuneModelArguments(model_name_or_path=teacher_path),
            None
            if teacher_is_fine_tuned
            else finetune_config(settings, folders["teacher"], settings.labels_learning_rate),
        ),
        "baseline": ComparisonRun(
            "baseline",
            FinetuneModelArguments(
                model_name_or_path=BASELINE_PRESET,
                model_overrides=baseline_shape,
                init_from_teacher=teacher_path,
                layer_map="uniform",
            ),
            run_config("baseline", settings.labels_learning_rate),
        ),
        "student": ComparisonRun(
            "student",
            FinetuneModelArguments(
                model_name_or_path=student.model_name_or_path,
                model_overrides=student.model_overrides,
                teacher=folders["teacher"],
                init_from_teacher=student.init_from_teacher,
                layer_map=student.layer_map,
            ),
            run_config("student", settings.learning_rate, augment_copies=copies, unlabeled_file=unlabeled_file),
            model_config=student_config,
        ),
    }
    for run in runs.values():
        run.teacher_name = teacher_name or teacher_path
    if narrowed:
        runs["baseline"].narrowed_width = f", {describe_width(student_config.to_dict())} each"
        runs["student"].narrowed = True
    return runs


def _fine_tune(run: ComparisonRun, data_args: FinetuneDataArguments) -> dict:
    transformers.set_seed(run.training.seed)  # every role starts from the same generator state
    runs = finetune(
        run.model,
        data_args,
        run.training,
        model_config=run.model_config,
        narrowed=run.narrowed,
        depth_choice=run.depth_choice,
    )
    return runs[0]


def run_comparison(
    runs: dict[str, ComparisonRun], data_args: FinetuneDataArguments, reused_teacher: str | None
) -> dict:
    """Fine-tune teacher (unless ``reused_teacher`` names the head of a given classifier, scored as it is), baseline
    and student; the summary fields of the comparison."""
    results, seconds = {}, {}
    for role, run in runs.items():
        start = time.perf_counter()
        if role == "teacher" and reused_teacher is not None:
            print(
                f"\n=== main job, task stage: the teacher {run.model.model_name_or_path} is already fine-tuned for "
                f"this task (a {reused_teacher} head over the data's labels): used as it is and scored on the dev "
                "set, not fine-tuned again",
                flush=True,
            )
            results[role] = evaluate_folder(run.model.model_name_or_path, data_args)
        else:
            print(f"\n=== main job, task stage: {run.describe()}", flush=True)
            results[role] = _fine_tune(run, data_args)
        seconds[role] = round(time.perf_counter() - start, 1)
    folders = {
        role: run.training.output_dir if run.training else run.model.model_name_or_path for role, run in runs.items()
    }
    accuracy = {role: results[role].get("eval_accuracy") for role in results}
    layers = ", ".join(str(layer) for layer in results["baseline"]["teacher_initialization"]["layer_map"])
    whose = "the pretrained teacher's" if reused_teacher is None else "the given teacher's"
    student = results["student"]
    return {
        "comparison": {
            "folders": {role: str(Path(folder).resolve()) for role, folder in folders.items()},
            "sst2_accuracy": accuracy,
            "share_of_teacher_kept": {
                role: round(accuracy[role] / accuracy["teacher"], 4) for role in ("baseline", "student")
            },
            "finetune_seconds": seconds,
            "teacher_fine_tuned_here": reused_teacher is None,
            "baseline": f"{whose} layers {layers} (0-based){runs['baseline'].narrowed_width}, fine-tuned on the labels",
        },
        "sst2_eval_accuracy": accuracy["student"],
        "finetune_seconds": seconds["student"],
        "finetune_output_dir": str(Path(folders["student"]).resolve()),
        "finetune_load_with": load_call(
            "transformers.AutoModelForSequenceClassification.from_pretrained", folders["student"]
        ),
        "finetune_runs": 1,
        "finetune_train_file": data_args.train_file,
        "finetune_validation_file": data_args.validation_file,
        "finetune_max_eval_samples": student["data"]["max_eval_samples"],
        "finetune_max_seq_length": student["data"]["max_seq_length"],
    }


def compare_latency(eager_folders: dict[str, str | Path], onnx_files: dict[str, Path]) -> dict:
    """Eager latency of the models in ``eager_folders`` — the teacher as transformers runs it (for reference), and
    every model on compact-bert's path (``optimize_for_inference``: role ``teacher (compact-bert path)``, baseline,
    student) — and onnxruntime latency of the ONNX files given, interleaved in one process at batch 1 x 128."""
    from ..configuration.dense_students import max_sequence_length
    from ..evaluation.runtime_latency import eager_runner, latency_inputs, measure_interleaved, onnxruntime_runner

    models = {
        role: transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
        for role, folder in eager_folders.items()
    }
    length = min(LATENCY_SEQUENCE_LENGTH, *(max_sequence_length(model.config) for model in models.values()))
    inputs = latency_inputs(models["student"].config.vocab_size, 1, length)
    runners = {
        f"{role} eager": eager_runner(model, inputs, optimize=role != "teacher") for role, model in models.items()
    }
    runners.update({f"{role} onnx": onnxruntime_runner(path, inputs) for role, path in onnx_files.items()})
    measured = measure_interleaved(runners, rounds=LATENCY_ROUNDS)
    return {name: round(result.median_ms, 2) for name, result in measured.items()}


def time_comparison(summary: dict) -> dict:
    """The comparison's latencies: teacher (as transformers runs it and on compact-bert's path), baseline and student
    eager, and teacher and student through onnxruntime, each in the form the shipping step chose for the student
    (``export.bert_onnx.fastest_onnx_file``)."""
    from ..export.bert_onnx import fastest_onnx_file
    from ..export.onnx_exporter import export_onnx

    folders = summary["comparison"]["folders"]
    # The teacher's export exists for the timing only: in a temporary folder, not the teacher's (where it would sit as
    # an undocumented file beside the model).
    with tempfile.TemporaryDirectory(prefix="compact-bert-teacher-onnx-") as scratch:
        export_onnx(folders["teacher"], Path(scratch), "text-classification")
        eager = {
            "teacher": folders["teacher"],
            "teacher (compact-bert path)": folders["teacher"],
            "baseline": folders["baseline"],
            "student": folders["student"],
        }
        onnx_files = {
            "teacher": fastest_onnx_file(Path(scratch)),
            "student": fastest_onnx_file(Path(folders["student"]) / "onnx"),
        }
        return compare_latency(eager, onnx_files)


def comparison_table(summary: dict) -> str:
    """The closing comparison: accuracy, share kept and latency ratios of baseline and student to the teacher."""
    comparison = summary["comparison"]
    accuracy, kept = comparison["sst2_accuracy"], comparison["share_of_teacher_kept"]
    latency = comparison.get("latency_ms", {})
    rows = [("", "SST-2 dev acc.", "kept", "eager ms", "vs teacher", "ONNX ms", "vs teacher")]
    teacher_eager, teacher_onnx = latency.get("teacher eager"), latency.get("teacher onnx")
    for role in ("teacher", "teacher (compact-bert path)", "baseline", "student"):
        eager, onnx = latency.get(f"{role} eager"), latency.get(f"{role} onnx")
        if role not in accuracy and eager is None:
            continue
        share = "100%" if role.startswith("teacher") else f"{100 * kept[role]:.1f}%"
        rows.append(
            (
                role,
                f"{100 * accuracy.get(role, accuracy['teacher']):.1f}%",
                share,
                f"{eager:.1f}" if eager else "-",
                f"{eager / teacher_eager:.2f}x" if eager and teacher_eager else "-",
                f"{onnx:.1f}" if onnx else "-",
                f"{onnx / teacher_onnx:.2f}x" if onnx and teacher_onnx else "-",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)
