"""The main job's task stage: the teacher, the layer-dropped baseline and the student, trained and timed side by side.

A distilled student is worth shipping only if it beats what a user gets without the library. So the main job
fine-tunes three models on the same data with the same settings (``compact-bert finetune`` each time; the student
at the task-distillation recipe's learning rate):

1. the **teacher** itself — the accuracy the student is measured against;
2. the **baseline**: the pretrained teacher with every other layer dropped (DistilBERT's initialization, no
   distillation) — a strong, free competitor at about half the teacher's cost;
3. the **student**: the distilled student, taught by the fine-tuned teacher (task distillation over the training
   set and its augmented copies, ``finetuning/task_distillation.py``).

Then it times the three side by side in one process (eager PyTorch; onnxruntime where installed) and prints the
closing comparison: accuracy, share of the teacher's accuracy kept, latency ratios.
"""

from __future__ import annotations

import json
import shlex
import tempfile
import time
from pathlib import Path

from ..configuration.presets import minilm_fields_like
from ..distillation.teachers import resolve_model_path
from ..finetuning.bundled_data import bundled_sst2_files
from ..finetuning.folder_evaluation import evaluate_folder
from ..finetuning.task_recipe import TRAINING_SETTINGS
from ..model_cards.load_calls import load_call
from . import finetune_command
from .training_common import as_flags

__all__ = [
    "COMPARISON_FLAGS",
    "COMPARISON_TRAINING_FLAGS",
    "LOGGING_FLAGS",
    "TASK_FLAGS",
    "baseline_arguments",
    "compare_latency",
    "comparison_commands",
    "comparison_table",
    "inherited_flags",
    "run_comparison",
    "time_comparison",
]

# The main job's task: SST-2, 64 tokens.
TASK_FLAGS = ("--task_name", "sst2", "--max_seq_length", "64")
LOGGING_FLAGS = ("--logging_strategy", "steps", "--logging_steps", "50")
# The teacher's learning rate when the job fine-tunes it (and the baseline's): half the student's
# (finetuning/task_recipe.py).
TEACHER_LEARNING_RATE = 1e-4


# Every model of the comparison trains with the task-distillation recipe's settings (finetuning/task_recipe.py: 3
# epochs over the bundled slice of 3,000 GLUE train sentences, batch 32, length-grouped batches — half the padding,
# half the time —, evaluated once at the end: no selection on the dev set); the teacher and the baseline learn the
# labels at the teacher's learning rate, the student takes the recipe as ``finetune --teacher`` does.
COMPARISON_TRAINING_FLAGS = (
    *as_flags({**TRAINING_SETTINGS, "learning_rate": TEACHER_LEARNING_RATE}),
    *LOGGING_FLAGS,
)
COMPARISON_FLAGS = (*TASK_FLAGS, *COMPARISON_TRAINING_FLAGS)
INHERITED_TRAINING_FLAGS = ("seed", "use_cpu", "disable_tqdm", "dataloader_num_workers", "keep_checkpoints")
LATENCY_SEQUENCE_LENGTH = 128
LATENCY_ROUNDS = 20


def baseline_arguments(teacher_path: str, output_dir: str, num_hidden_layers: int | None = None) -> list[str]:
    """The ``compact-bert finetune`` model flags of the layer-dropped baseline: the teacher's own architecture and
    width with ``num_hidden_layers`` (default half, rounded up) of the pretrained teacher's layers, evenly spaced."""
    from transformers import AutoConfig

    overrides = json.dumps(minilm_fields_like(AutoConfig.from_pretrained(teacher_path), num_hidden_layers))
    return [
        "--model_name_or_path",
        "minilm-3l-384h",
        "--model_overrides",
        overrides,
        "--init_from_teacher",
        teacher_path,
        "--layer_map",
        "uniform",
        "--output_dir",
        output_dir,
    ]


def inherited_flags(training_args) -> list[str]:
    """The distillation command's flags that every fine-tuning run of the main job inherits (seed, device, progress
    bars, data workers, logging integrations), so that one command line sets them for all."""
    inherited = [
        item for name in INHERITED_TRAINING_FLAGS for item in (f"--{name}", str(getattr(training_args, name)))
    ]
    report_to = [target for target in (training_args.report_to or []) if target != "none"] or ["none"]
    return [*inherited, "--report_to", *report_to]


def _fine_tuned_teacher(teacher_path: str, data_args) -> str | None:
    """The head name when ``teacher_path`` is already fine-tuned for the main job's task (a sequence-classification
    head over the data's labels, in order), else ``None`` (a pretrained encoder: fine-tuned here). A classifier over
    other labels is refused: fine-tuning it again would silently replace its head."""
    from ..finetuning.data import load_finetuning_data
    from ..finetuning.task_distillation import check_task_head, has_task_head
    from ..training.run_errors import RunSettingsError

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


def _finetune(argv: list[str]) -> dict:
    runs = finetune_command.finetune_from_flags(argv)
    if len(runs) != 1:
        raise SystemExit("The main job's comparison trains one model per role: give one seed, rate and rank.")
    return runs[0]


def comparison_commands(
    student_dir: str,
    teacher_path: str,
    output_dir: str,
    training_args,
    train_file: str | None,
    validation_file: str | None,
    student_flags: list[str],
    common_flags: list[str],
    student_output_dir: str | None = None,
    baseline_layers: int | None = None,
) -> tuple[dict, list[str], dict]:
    """The folders, data flags and ``compact-bert finetune`` command line of each role (``run_comparison``)."""
    files = bundled_sst2_files()
    base = str(output_dir).rstrip("/")
    data = [
        "--train_file",
        train_file or str(files["train"]),
        "--validation_file",
        validation_file or str(files["validation"]),
    ]
    shared = [*data, *COMPARISON_FLAGS, *inherited_flags(training_args)]
    folders = {role: f"{base}-{role}-sst2" for role in ("teacher", "baseline")}
    folders["student"] = student_output_dir or f"{base}-sst2"
    commands = {
        "teacher": ["--model_name_or_path", teacher_path, "--output_dir", folders["teacher"], *shared, *common_flags],
        "baseline": [
            *baseline_arguments(teacher_path, folders["baseline"], baseline_layers),
            *shared,
            *common_flags,
        ],
        "student": [  # --teacher: the recipe's training settings, which the user's flags override
            "--model_name_or_path",
            student_dir,
            "--teacher",
            folders["teacher"],
            "--output_dir",
            folders["student"],
            *data,
            *TASK_FLAGS,
            *LOGGING_FLAGS,
            *inherited_flags(training_args),
            *common_flags,
            *student_flags,
        ],
    }
    return folders, data, commands


def run_comparison(
    student_dir: str,
    teacher: str,
    output_dir: str,
    training_args,
    train_file: str | None,
    validation_file: str | None,
    student_flags: list[str],
    common_flags: list[str],
    student_output_dir: str | None = None,
    baseline_layers: int | None = None,
) -> dict:
    """Fine-tune teacher, baseline and student (module docstring) into ``<output_dir>-teacher-sst2``,
    ``<output_dir>-baseline-sst2`` and ``student_output_dir`` (default ``<output_dir>-sst2``); the summary fields
    of the comparison. The baseline keeps ``baseline_layers`` of the teacher's layers (default: half, rounded up;
    the main job gives its student's depth)."""
    teacher_path = str(resolve_model_path(teacher))
    folders, data, commands = comparison_commands(
        student_dir,
        teacher_path,
        output_dir,
        training_args,
        train_file,
        validation_file,
        student_flags,
        common_flags,
        student_output_dir,
        baseline_layers,
    )
    runs, seconds = {}, {}
    # The user's classifier is the teacher as it is: its folder, scored with the teacher's data settings, never
    # written.
    planned_teacher = Path(folders["teacher"])
    planned_existed = planned_teacher.exists()
    teacher_data = finetune_command.parse_finetune_arguments(commands["teacher"])[1]  # checks (makes) its folder
    reused = _fine_tuned_teacher(teacher_path, teacher_data)
    if reused is not None:
        if not planned_existed and planned_teacher.is_dir() and not any(planned_teacher.iterdir()):
            planned_teacher.rmdir()  # no teacher is trained there
        folders["teacher"] = teacher_path
        commands["student"][commands["student"].index("--teacher") + 1] = teacher_path
    for role in ("teacher", "baseline", "student"):
        start = time.perf_counter()
        if role == "teacher" and reused is not None:
            print(
                f"\n=== main job, task stage: the teacher {teacher_path} is already fine-tuned for this task (a "
                f"{reused} head over the data's labels): used as it is and scored on the dev set, not fine-tuned again"
            )
            runs[role] = evaluate_folder(teacher_path, teacher_data)
        else:
            print(f"\n=== main job, task stage: the {role} (compact-bert finetune {shlex.join(commands[role])})")
            runs[role] = _finetune(commands[role])
        seconds[role] = round(time.perf_counter() - start, 1)
    accuracy = {role: runs[role].get("eval_accuracy") for role in runs}
    return {
        "comparison": {
            "folders": {role: str(Path(folder).resolve()) for role, folder in folders.items()},
            "sst2_accuracy": accuracy,
            "share_of_teacher_kept": {
                role: round(accuracy[role] / accuracy["teacher"], 4) for role in ("baseline", "student")
            },
            "finetune_seconds": seconds,
            "teacher_fine_tuned_here": reused is None,
            "baseline": ("the pretrained teacher's layers " if reused is None else "the given teacher's layers ")
            + ", ".join(str(layer) for layer in runs["baseline"]["teacher_initialization"]["layer_map"])
            + " (0-based), fine-tuned on the labels",
        },
        "sst2_eval_accuracy": accuracy["student"],
        "finetune_seconds": seconds["student"],
        "finetune_output_dir": str(Path(folders["student"]).resolve()),
        "finetune_load_with": load_call(
            "transformers.AutoModelForSequenceClassification.from_pretrained", folders["student"]
        ),
        "finetune_runs": 1,
        "finetune_train_file": data[1],
        "finetune_validation_file": data[3],
        "finetune_max_eval_samples": runs["student"]["data"]["max_eval_samples"],
        "finetune_max_seq_length": runs["student"]["data"]["max_seq_length"] or 64,
    }


def compare_latency(eager_folders: dict[str, str | Path], onnx_files: dict[str, Path]) -> dict:
    """Eager latency of the models in ``eager_folders`` — the teacher as transformers runs it (for reference), and
    every model on compact-bert's path (``optimize_for_inference``: role ``teacher (compact-bert path)``, baseline,
    student) — and onnxruntime latency of the ONNX files given, interleaved in one process at batch 1 x 128."""
    import transformers

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
    (``export.onnx_exporter.fastest_onnx_file``)."""
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
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)
