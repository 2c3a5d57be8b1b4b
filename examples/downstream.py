"""The fine-tuning stage the recipes share: ``compact-bert finetune`` of a distilled folder on the shared GLUE
SST-2 / CoNLL-2003 data, one run per seed, and the dev metric as mean ± sample standard deviation.

Every recipe fine-tunes every model with the same flags (the main job's: 3 epochs, batch 32, learning rate
3e-4 with a 10% warm-up, one evaluation at the end, so no checkpoint is picked on the dev set), on the first
``max_train_samples`` training examples; the official validation sets are used only for that evaluation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_DATA_DIR",
    "DownstreamTask",
    "TASKS",
    "check_data_dir",
    "finetune_seeds",
    "mean_and_spread",
    "write_results",
]

DEFAULT_DATA_DIR = Path("../shared/data")  # the shared data beside a checkout (see its README)


@dataclass(frozen=True)
class DownstreamTask:
    train_file: str  # relative to the data directory
    validation_file: str
    metric: str  # the key in `compact-bert finetune`'s run summary
    flags: tuple[str, ...]  # task flags of `compact-bert finetune`
    max_train_samples: int


TASKS = {
    # Paper 002 Table 7: SST-2 at 64 tokens, CoNLL-2003 at 128, entity-level F1.
    "sst2": DownstreamTask(
        "sst2/train.tsv",
        "sst2/validation.tsv",
        "eval_accuracy",
        ("--task_name", "sst2", "--max_seq_length", "64"),
        8000,
    ),
    "conll2003": DownstreamTask(
        "conll2003/train.txt",
        "conll2003/validation.txt",
        "eval_overall_f1",
        ("--task_name", "ner", "--max_seq_length", "128"),
        4000,
    ),
}
FINETUNE_FLAGS = (
    "--num_train_epochs",
    "3",
    "--learning_rate",
    "3e-4",
    "--per_device_train_batch_size",
    "32",
    "--eval_strategy",
    "no",
    "--save_strategy",
    "no",
    "--load_best_model_at_end",
    "false",
    "--logging_strategy",
    "steps",
    "--logging_steps",
    "50",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--use_cpu",
    "true",
    # As these tables were measured: MoE students fine-tuned with their checkpoint's capacity factor (1.25), from
    # their own folders (no teacher initialization applies to folders).
    "--capacity_factor",
    "checkpoint",
)


def check_data_dir(data_dir: Path, tasks: list[str]) -> None:
    """Fail before any training when a data file is missing, naming it and where the data comes from."""
    missing = [
        str(data_dir / name)
        for task in tasks
        for name in (TASKS[task].train_file, TASKS[task].validation_file)
        if not (data_dir / name).is_file()
    ]
    if missing:
        raise SystemExit(
            f"--data_dir: missing {', '.join(missing)}. The recipes fine-tune on the shared GLUE SST-2 and "
            "CoNLL-2003 files (sst2/train.tsv, sst2/validation.tsv, conll2003/train.txt, "
            "conll2003/validation.txt); point --data_dir at a folder that holds them."
        )


def finetune_seeds(
    model_dir: Path, task: str, data_dir: Path, output_dir: Path, seeds: list[int], extra_flags: tuple[str, ...] = ()
) -> dict:
    """One ``compact-bert finetune`` per seed; returns ``{"values": [...per seed], "seconds": [...]}``."""
    spec = TASKS[task]
    command = [
        sys.executable,
        "-m",
        "compact_bert.cli.main",
        "finetune",
        "--model_name_or_path",
        str(model_dir),
        "--train_file",
        str(data_dir / spec.train_file),
        "--validation_file",
        str(data_dir / spec.validation_file),
        *spec.flags,
        "--max_train_samples",
        str(spec.max_train_samples),
        *FINETUNE_FLAGS,
        "--seeds",
        *map(str, seeds),
        "--output_dir",
        str(output_dir),
        # The recipe owns its run folders: running it again starts each run over (compact-bert refuses that otherwise).
        "--overwrite_output_dir",
        *extra_flags,
    ]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    folders = [output_dir / f"seed-{seed}" for seed in seeds] if len(seeds) > 1 else [output_dir]
    runs = [json.loads((folder / "run_summary.json").read_text()) for folder in folders]
    return {"values": [run[spec.metric] for run in runs], "seconds": [run["train_seconds"] for run in runs]}


def mean_and_spread(values: list[float], scale: float = 100.0) -> str:
    """``mean ± sample standard deviation`` (in percent by default), the seed count beside it."""
    mean = sum(values) / len(values)
    spread = (sum((value - mean) ** 2 for value in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return f"{mean * scale:.1f} ± {spread * scale:.1f}"


def write_results(output_dir: Path, table: str, results: dict) -> None:
    """A recipe's outcome: ``results.md`` (the Markdown table the README quotes), ``results.json`` (every
    number behind it), and the table printed."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (output_dir / "results.md").write_text(table + "\n")
    print(table)
