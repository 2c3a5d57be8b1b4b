"""The README's student tables: what starting from the teacher and distilling the task buy, on two tasks.

For each task (GLUE SST-2, scored on the full dev set; CoNLL-2003 NER, scored by entity F1 on its dev set) and each
seed, this recipe fine-tunes the packaged teacher (all-MiniLM-L6-v2) and then nine students, three shapes times
three starts:

- shapes: ``minimoe-4l-384h`` (4 layers, 4 top-1 experts per FFN), its dense twin ``minilm-4l-384h`` (the same
  FLOPs per token: paper 002's comparison), and the width-reduced ``minimoe-4l-192h``;
- starts: **random init** (the preset's random weights, fine-tuned on the labels); **teacher init** (initialized
  from the *pretrained* teacher, ``--init_from_teacher``: layers 1, 3, 5 and the last, Minitron width selection for
  192 hidden, upcycled or split experts; then fine-tuned on the labels); **teacher init + task distillation**
  (initialized from the *fine-tuned* teacher and taught by its soft targets, ``--teacher``; on SST-2 also over 2
  augmented copies of the training set, as the main job does).

Every model is trained with the main job's settings (3 epochs, batch 32, learning rate 1e-4, length-grouped
batches, one evaluation at the end: the dev sets are never used to pick a checkpoint or a setting). Training data:
the bundled 3,000-sentence SST-2 slice at 64 tokens; the first 4,000 CoNLL-2003 training sentences at 128 tokens.
Each run's CPU time (all threads of this process, ``time.process_time``) is recorded; a task-distilled student's
includes computing its teacher's logits (no cache is shared between runs), not the teacher's own fine-tuning,
which has its own row. Latency: batch 1 x 128 on the CPU, every model eager, measured interleaved in one process
(``evaluation/runtime_latency.py``) on the SST-2 classifiers of the first seed; the ratio is to the teacher as
transformers runs it.

Every finished run leaves ``recipe_run.json`` in its folder and is not repeated when the recipe is run again, so an
interruption loses at most the run in progress. Outcome: ``results.md`` (the tables), ``results.json`` (every number)
and ``accuracy_vs_latency.png`` in ``--output_dir``.

Run: ``python -m examples.student_results --output_dir runs/student_results`` (about 30
minutes per seed on 2 CPU cores: 61 minutes for the README's two seeds). Needs ``sst2/validation.tsv`` and
``conll2003/{train,validation}.txt`` under ``--data_dir`` (the shared data beside a checkout).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from compact_bert.cli import finetune_command
from compact_bert.distillation.teachers import resolve_model_path
from compact_bert.finetuning.bundled_data import bundled_sst2_files

from .comparison_flags import COMPARISON_TRAINING_FLAGS
from .downstream import DEFAULT_DATA_DIR
from .student_results_report import write_report

__all__ = ["SHAPES", "STARTS", "TASKS", "check_data", "main", "recipe_parser", "run_once", "training_flags"]

TEACHER = "all-MiniLM-L6-v2"
SHAPES = ("minimoe-4l-384h", "minilm-4l-384h", "minimoe-4l-192h")
STARTS = ("random init", "teacher init", "teacher init + task distillation")


# The main job's training settings; each task sets its own task name and length.
_SHARED_FLAGS = list(COMPARISON_TRAINING_FLAGS)
TASKS = {
    # name -> (metric in the run summary, flags that pick the data, augmented copies for task distillation)
    "sst2": (
        "eval_accuracy",
        [
            "--task_name",
            "sst2",
            "--max_seq_length",
            "64",
            "--validation_file",
            "{data}/sst2/validation.tsv",
            "--train_file",
            "{bundled_sst2}",
        ],
        2,
    ),
    "conll2003": (
        "eval_overall_f1",
        [
            "--task_name",
            "ner",
            "--max_seq_length",
            "128",
            "--train_file",
            "{data}/conll2003/train.txt",
            "--validation_file",
            "{data}/conll2003/validation.txt",
            "--max_train_samples",
            "4000",
        ],
        0,
    ),
}
RUN_RECORD = "recipe_run.json"


def training_flags(task: str, data_dir: Path) -> list[str]:
    """``compact-bert finetune`` flags of every model of ``task``: its data, the main job's settings, no reporting."""
    fill = {"data": str(data_dir), "bundled_sst2": str(bundled_sst2_files()["train"])}
    return [
        *(flag.format(**fill) for flag in TASKS[task][1]),
        *_SHARED_FLAGS,
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--use_cpu",
        "true",
    ]


def _start_flags(start: str, task: str, teacher_dir: Path, pretrained: str) -> list[str]:
    if start == "random init":
        return ["--init_from_teacher", "none"]
    if start == "teacher init":
        return ["--init_from_teacher", pretrained]
    return ["--teacher", str(teacher_dir), "--augment_copies", str(TASKS[task][2])]


def _check_start(folder: Path, start: str, teacher_dir: Path, pretrained: str) -> None:
    """The run started where its row says: ``--init_from_teacher auto`` falls back to random weights (with a
    warning) when a teacher cannot initialize a student, which must not pass for a teacher-initialized row."""
    summary = json.loads((folder / "run_summary.json").read_text())
    found = (summary.get("teacher_initialization") or {}).get("teacher")
    expected = {"random init": None, "teacher init": pretrained}.get(start, str(teacher_dir))
    if found != expected:
        raise SystemExit(f"{folder}: the '{start}' run started from {found or 'random weights'}, not {expected}.")


def _own_cache(folder: Path, arguments: list[str]) -> list[str]:
    """A task-distilled run computes its teacher's logits itself (a cache inside its own folder), so that its CPU
    time includes them instead of borrowing an earlier run's."""
    return (
        [*arguments, "--teacher_cache_dir", str(folder / "teacher_cache")] if "--teacher" in arguments else arguments
    )


def run_once(folder: Path, arguments: list[str], metric: str) -> dict:
    """One ``compact-bert finetune`` into ``folder``, or the record of an earlier finished one. Returns the dev
    metric, the CPU and wall seconds of training and evaluation, and which checkpoint the metric is of."""
    record_path = folder / RUN_RECORD
    if record_path.is_file():
        return json.loads(record_path.read_text())
    if folder.exists():  # an interrupted run: its partial folder is not a result
        shutil.rmtree(folder)
    arguments = [*_own_cache(folder, arguments), "--output_dir", str(folder)]
    print("$ compact-bert finetune " + " ".join(arguments), flush=True)
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    summary = finetune_command.finetune_from_flags(arguments)[0]
    record = {
        "value": summary[metric],
        "cpu_seconds": round(time.process_time() - cpu_start, 1),
        "wall_seconds": round(time.perf_counter() - wall_start, 1),
        "reported_checkpoint": summary["reported_checkpoint"],
        # which teacher the student started from (None: random weights), so a start is checked, not assumed
        "initialized_from": (summary.get("teacher_initialization") or {}).get("teacher"),
    }
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def check_data(data_dir: Path, tasks: list[str]) -> None:
    needed = {"sst2": ["sst2/validation.tsv"], "conll2003": ["conll2003/train.txt", "conll2003/validation.txt"]}
    missing = [str(data_dir / name) for task in tasks for name in needed[task] if not (data_dir / name).is_file()]
    if missing:
        raise SystemExit(
            f"--data_dir: missing {', '.join(missing)}; point --data_dir at the shared data folder "
            "(GLUE SST-2 dev set, CoNLL-2003 train and dev)."
        )


def measure_latency(folders: dict[str, Path]) -> dict[str, float]:
    """Median eager milliseconds at batch 1 x 128 of every folder's classifier, interleaved in one process."""
    import transformers

    from compact_bert.evaluation.runtime_latency import eager_runner, latency_inputs, measure_interleaved

    models = {
        name: transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
        for name, folder in folders.items()
    }
    inputs = latency_inputs(models["teacher"].config.vocab_size, 1, 128)
    measured = measure_interleaved({name: eager_runner(model, inputs) for name, model in models.items()}, rounds=30)
    return {name: result.median_ms for name, result in measured.items()}


def recipe_parser(description: str, output_dir: str) -> argparse.ArgumentParser:
    """The flags of every recipe that fine-tunes on ``TASKS``: where, on what data, which seeds and tasks."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--output_dir", type=Path, default=Path(output_dir))
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = recipe_parser(__doc__.split("\n\n")[0], "runs/student_results").parse_args(argv)
    if len(args.seeds) < 2:
        print("Note: with one seed the tables show no spread.", file=sys.stderr)
    check_data(args.data_dir, args.tasks)
    pretrained = str(resolve_model_path(TEACHER))
    runs: dict = {}
    for task in args.tasks:
        metric = TASKS[task][0]
        flags = training_flags(task, args.data_dir)
        for seed in args.seeds:
            seeded = [*flags, "--seed", str(seed)]
            base = args.output_dir / task / f"seed-{seed}"
            teacher_dir = base / "teacher"
            teacher = run_once(teacher_dir, ["--model_name_or_path", pretrained, *seeded], metric)
            runs.setdefault(task, {}).setdefault("teacher", {}).setdefault("teacher", []).append(teacher)
            for shape in SHAPES:
                for index, start in enumerate(STARTS):
                    folder = base / f"{shape}-start{index}"
                    record = run_once(
                        folder,
                        ["--model_name_or_path", shape, *_start_flags(start, task, teacher_dir, pretrained), *seeded],
                        metric,
                    )
                    _check_start(folder, start, teacher_dir, pretrained)
                    runs[task].setdefault(shape, {}).setdefault(start, []).append(record)
            (args.output_dir / "runs.json").write_text(json.dumps(runs, indent=2) + "\n")
    first = args.output_dir / "sst2" / f"seed-{args.seeds[0]}"
    latency = None
    if "sst2" in args.tasks:
        latency = measure_latency(
            {"teacher": first / "teacher", **{shape: first / f"{shape}-start2" for shape in SHAPES}}
        )
    write_report(args.output_dir, runs, latency, args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
