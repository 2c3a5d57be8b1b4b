"""Which fine-tuning remedy keeps more accuracy when a MoE student's router was learned on other text: no capacity
limit, or a re-balanced router.

The student is MiniMoE 4L;192H from random weights after 200 steps of general
MiniLMv2 distillation on the bundled WikiText-2 slice (the settings of ``minimoe_vs_minilm``), so its routers were
learned on encyclopedia text. It is then fine-tuned on SST-2 (the bundled slice, scored on the full dev set) and
CoNLL-2003 (the first 4,000 training sentences, dev entity F1) with the main job's settings (``student_results``),
four ways:

- ``capacity 1.25``: the checkpoint's capacity factor, routers as distilled;
- ``no capacity limit``: nothing dropped (the default, ``--capacity_factor none``);
- ``capacity 1.25, re-balanced``: routers' biases shifted first so the task's first 256 training examples spread
  evenly (``--rebalance_routers``), then the checkpoint's capacity factor;
- ``no limit, re-balanced``: both.

Reported per remedy: the dev metric per seed, the largest expert share at the first logged step and the fraction
of real tokens dropped past their FFN (first logged step, and the mean over training; the worst block), read from
the run's own training log (``trainer_state.json``, logged every 10 steps). Nothing is selected on the dev sets.

Run: ``python -m examples.capacity_remedies --output_dir runs/capacity_remedies`` (about 11
minutes on 2 CPU cores).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from compact_bert.training.routing_keys import ROUTING_KEY

from .downstream import mean_and_spread, write_results
from .student_results import TASKS, check_data, recipe_parser, run_once, training_flags

__all__ = ["REMEDIES", "main", "routing_log"]

STUDENT = "minimoe-4l-192h"
DISTILLATION = [
    "--max_steps",
    "200",
    "--per_device_train_batch_size",
    "16",
    "--finetune",
    "false",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--use_cpu",
    "true",
    "--init_from_teacher",
    "none",
    "--learning_rate",
    "1e-3",
    "--warmup_steps",
    "20",
    "--save_steps",
    "50",
    "--seed",
    "0",
    "--data_seed",
    "0",
]
REMEDIES = {
    "capacity 1.25": ["--capacity_factor", "checkpoint"],
    "no capacity limit": ["--capacity_factor", "none"],
    "capacity 1.25, re-balanced": ["--capacity_factor", "checkpoint", "--rebalance_routers", "true"],
    "no limit, re-balanced": ["--capacity_factor", "none", "--rebalance_routers", "true"],
}


def _distilled_student(folder: Path) -> Path:
    if not (folder / "run_summary.json").is_file():
        command = [
            sys.executable,
            "-m",
            "compact_bert.cli.main",
            "distill",
            "minimoe",
            "--student_preset",
            STUDENT,
            "--output_dir",
            str(folder),
            "--overwrite_output_dir",  # an interrupted distillation of this recipe is started over
            *DISTILLATION,
        ]
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)
    return folder


def _is_training_routing(key: str) -> bool:
    found = ROUTING_KEY.match(key)
    return found is not None and not found["prefix"]


def routing_log(run_folder: Path) -> dict:
    """Worst-block routing numbers of a fine-tuning run from its ``trainer_state.json``: largest expert share and
    dropped fraction at the first logged step, and the dropped fraction averaged over the logged steps."""
    history = [
        entry
        for entry in json.loads((run_folder / "trainer_state.json").read_text())["log_history"]
        if any(_is_training_routing(key) for key in entry)
    ]

    def worst(entry: dict, suffix: str) -> float:
        # training steps only: the final evaluation logs eval_block*_... under the evaluation's (unlimited) capacity
        return max(float(value) for key, value in entry.items() if _is_training_routing(key) and key.endswith(suffix))

    return {
        "first_max_expert_share": worst(history[0], "_max_expert_share"),
        "first_dropped_fraction": worst(history[0], "_dropped_fraction"),
        "mean_dropped_fraction": statistics.fmean(worst(entry, "_dropped_fraction") for entry in history),
    }


def main(argv: list[str] | None = None) -> int:
    args = recipe_parser(__doc__.split("\n\n")[0], "runs/capacity_remedies").parse_args(argv)
    check_data(args.data_dir, args.tasks)
    student = _distilled_student(args.output_dir / "student")
    results: dict = {}
    for task in args.tasks:
        flags = [*training_flags(task, args.data_dir), "--logging_steps", "10"]
        for name, remedy in REMEDIES.items():
            for seed in args.seeds:
                folder = args.output_dir / task / f"{'-'.join(name.replace(',', '').split())}-seed{seed}"
                record = run_once(
                    folder,
                    ["--model_name_or_path", str(student), *flags, *remedy, "--seed", str(seed)],
                    TASKS[task][0],
                )
                results.setdefault(task, {}).setdefault(name, []).append({**record, **routing_log(folder)})
    lines = []
    for task, by_remedy in results.items():
        lines += [
            f"**{task}** ({TASKS[task][0]}, final model), student `{STUDENT}` distilled 200 steps from random weights",
            "",
            "| remedy | per seed | mean ± std | largest expert share, first logged step | dropped, first "
            "logged step | dropped, mean over training |",
            "|---|---|---|---|---|---|",
        ]
        for name, records in by_remedy.items():
            mean = {
                key: statistics.fmean(record[key] for record in records)
                for key in ("first_max_expert_share", "first_dropped_fraction", "mean_dropped_fraction")
            }
            values = [record["value"] for record in records]
            lines.append(
                f"| {name} | {', '.join(f'{100 * value:.1f}' for value in values)} | {mean_and_spread(values)} | "
                f"{100 * mean['first_max_expert_share']:.0f}% | {100 * mean['first_dropped_fraction']:.1f}% | "
                f"{100 * mean['mean_dropped_fraction']:.1f}% |"
            )
        lines.append("")
    lines.append(f"Seeds {args.seeds}; routing numbers: the worst block, averaged over seeds.")
    write_results(args.output_dir, "\n".join(lines), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
