"""MiniMoE 4L;192H (1,4E) against its dense MiniLM 4L;192H (1,1E) counterpart, distilled from the packaged
all-MiniLM-L6-v2 on the bundled WikiText-2 slice for the same steps and seeds; reports the self-attention
relation loss on held-out text (WikiText-2 test articles never used for training) and expert-load
statistics (largest/smallest share of real tokens per expert, per MoE block).

Run: ``python -m compact_bert.distillation.recipes.minimoe_vs_minilm --output_dir runs/minimoe_vs_minilm``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

__all__ = ["main"]

PRESETS = ("minimoe-4l-192h", "minilm-4l-192h")
BATCH_SIZE = 16


def _distill(preset: str, seed: int, steps: int, output_dir: Path) -> dict:
    command = [sys.executable, "-m", "compact_bert.cli.main", "distill", "minimoe", "--student_preset", preset,
               "--seed", str(seed), "--data_seed", str(seed), "--max_steps", str(steps), "--output_dir", str(output_dir),
               "--per_device_train_batch_size", str(BATCH_SIZE),
               "--max_eval_blocks", "512", "--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true"]  # fmt: skip
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return json.loads((output_dir / "run_summary.json").read_text())


def _shares(summary: dict, kind: str) -> list[float]:
    blocks = sorted(int(key[len("eval_block"):].split("_")[0]) for key in summary if key.endswith(f"_{kind}_expert_share"))
    return [summary[f"eval_block{block}_{kind}_expert_share"] for block in blocks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", type=Path, default=Path("runs/minimoe_vs_minilm"))
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args(argv)

    results = {preset: [_distill(preset, seed, args.steps, args.output_dir / f"{preset}-seed{seed}") for seed in args.seeds]
               for preset in PRESETS}  # fmt: skip
    lines = [
        f"{args.steps} steps x batch {BATCH_SIZE} x 128 tokens, seeds {args.seeds}; held-out = bundled WikiText-2 test slice.",
        "",
        "| student | params (total / active per token) | held-out relation loss per seed | mean | "
        "max expert share per block | min expert share per block |",
        "|---|---|---|---|---|---|",
    ]
    for preset, runs in results.items():
        losses = [run["eval_relation_loss"] for run in runs]
        params = f"{runs[0]['student_total_params'] / 1e6:.1f}M / {runs[0]['student_active_params_per_token'] / 1e6:.1f}M"
        max_shares = " / ".join(f"{value:.2f}" for value in _shares(runs[0], "max")) or "-"
        min_shares = " / ".join(f"{value:.2f}" for value in _shares(runs[0], "min")) or "-"
        lines.append(
            f"| {preset} | {params} | {', '.join(f'{value:.4f}' for value in losses)} | "
            f"{statistics.mean(losses):.4f} | {max_shares} | {min_shares} |"
        )
    lines.append("")
    lines.append(f"Expert shares are from seed {args.seeds[0]}, averaged over the held-out batches (uniform = 0.25).")
    table = "\n".join(lines)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "results.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
