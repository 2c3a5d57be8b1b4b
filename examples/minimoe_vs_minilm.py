"""MiniMoE 4L;192H (1,4E) against its dense MiniLM 4L;192H (1,1E) counterpart (paper 002's claim: MiniMoE >=
MiniLM at equal FLOPs), distilled from the packaged all-MiniLM-L6-v2 on the bundled WikiText-2 slice with the
main job's settings, for the same steps and seeds; reports the self-attention relation loss on held-out text
(WikiText-2 test articles never used for training), expert-load statistics (largest/smallest share of real
tokens per expert, per MoE block), and the downstream quality of each distilled student: SST-2 dev accuracy
and CoNLL-2003 dev entity F1 after fine-tuning (``downstream.py``; seed s fine-tunes the student distilled
with seed s, so the spread covers both stages).

Run: ``python -m examples.minimoe_vs_minilm --output_dir runs/minimoe_vs_minilm``
(about 45 minutes on 2 CPU cores; the fine-tuning data: ``--data_dir``, default ``../shared/data``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from .downstream import DEFAULT_DATA_DIR, TASKS, check_data_dir, finetune_seeds, mean_and_spread, write_results

__all__ = ["main"]

PRESETS = ("minimoe-4l-192h", "minilm-4l-192h")
BATCH_SIZE = 16


def _distill(preset: str, seed: int, steps: int, output_dir: Path) -> dict:
    command = [
        sys.executable,
        "-m",
        "compact_bert.cli.main",
        "distill",
        "minimoe",
        "--student_preset",
        preset,
        "--seed",
        str(seed),
        "--data_seed",
        str(seed),
        "--max_steps",
        str(steps),
        "--output_dir",
        str(output_dir),
        "--overwrite_output_dir",  # the recipe owns its run folders: running it again starts each run over
        "--finetune",
        "false",
        "--per_device_train_batch_size",
        str(BATCH_SIZE),
        "--max_eval_blocks",
        "512",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--use_cpu",
        "true",
        # As this table was measured: students from random weights, at the learning rate and warm-up that
        # were the defaults then.
        "--init_from_teacher",
        "none",
        "--learning_rate",
        "1e-3",
        "--warmup_steps",
        "20",
        "--save_steps",
        "50",
    ]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return json.loads((output_dir / "run_summary.json").read_text())


def _shares(summary: dict, kind: str) -> list[float]:
    blocks = sorted(
        int(key[len("eval_block") :].split("_")[0]) for key in summary if key.endswith(f"_{kind}_expert_share")
    )
    return [summary[f"eval_block{block}_{kind}_expert_share"] for block in blocks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", type=Path, default=Path("runs/minimoe_vs_minilm"))
    parser.add_argument("--steps", type=int, default=200, help="Distillation steps (the main job's default).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR, help="Holds sst2/ and conll2003/.")
    args = parser.parse_args(argv)
    check_data_dir(args.data_dir, list(TASKS))

    results = {
        preset: [_distill(preset, seed, args.steps, args.output_dir / f"{preset}-seed{seed}") for seed in args.seeds]
        for preset in PRESETS
    }
    downstream = {
        preset: {
            task: [
                finetune_seeds(
                    args.output_dir / f"{preset}-seed{seed}",
                    task,
                    args.data_dir,
                    args.output_dir / f"{preset}-seed{seed}-{task}",
                    [seed],
                )["values"][0]
                for seed in args.seeds
            ]
            for task in TASKS
        }
        for preset in PRESETS
    }
    lines = [
        f"{args.steps} steps x batch {BATCH_SIZE} x 128 tokens, seeds {args.seeds}; held-out = bundled WikiText-2 test slice.",
        "",
        "| student | params (total / active per token) | held-out relation loss per seed | mean | "
        "max expert share per block | min expert share per block |",
        "|---|---|---|---|---|---|",
    ]
    for preset, runs in results.items():
        losses = [run["eval_relation_loss"] for run in runs]
        params = (
            f"{runs[0]['student_total_params'] / 1e6:.1f}M / {runs[0]['student_active_params_per_token'] / 1e6:.1f}M"
        )
        max_shares = " / ".join(f"{value:.2f}" for value in _shares(runs[0], "max")) or "-"
        min_shares = " / ".join(f"{value:.2f}" for value in _shares(runs[0], "min")) or "-"
        lines.append(
            f"| {preset} | {params} | {', '.join(f'{value:.4f}' for value in losses)} | "
            f"{statistics.mean(losses):.4f} | {max_shares} | {min_shares} |"
        )
    lines.append("")
    lines.append(f"Expert shares are from seed {args.seeds[0]}, averaged over the held-out batches (uniform = 0.25).")
    lines += [
        "",
        "| student | SST-2 dev accuracy per seed | mean ± std | CoNLL-2003 dev entity F1 per seed | mean ± std |",
        "|---|---|---|---|---|",
    ]
    for preset, scores in downstream.items():
        cells = [
            f"{', '.join(f'{100 * value:.1f}' for value in scores[task])} | {mean_and_spread(scores[task])}"
            for task in TASKS
        ]
        lines.append(f"| {preset} | {' | '.join(cells)} |")
    lines.append("")
    lines.append(
        f"Fine-tuning: {', '.join(f'{task} first {spec.max_train_samples} train examples' for task, spec in TASKS.items())}; "
        "3 epochs, batch 32, lr 3e-4, official dev sets."
    )
    write_results(args.output_dir, "\n".join(lines), {"distillation": results, "downstream": downstream})
    return 0


if __name__ == "__main__":
    sys.exit(main())
