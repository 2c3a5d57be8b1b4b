"""MobileBERT recipe at laptop scale: pre-train a small IB-BERT teacher, then distill a MobileBERT-shaped
student with each strategy (AKT, JKT, PKT) for the same number of steps, fine-tune each student on SST-2
(``downstream.py``; paper 001 Table 8's direction: PKT >= JKT >= AKT); print a Markdown results table.

Run: ``python -m examples.mobilebert_small --output_dir runs/mobilebert_small``
(about 25 minutes on 2 CPU cores). Data: the bundled WikiText-2 slice for training and the bundled held-out
slice for the pre-training numbers; the shared GLUE SST-2 files (``--data_dir``, default ``../shared/data``)
for fine-tuning, with one run per ``--seeds`` value from the same distilled student.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from .downstream import DEFAULT_DATA_DIR, TASKS, check_data_dir, finetune_seeds, mean_and_spread, write_results

__all__ = ["STUDENT", "TEACHER", "main"]

# IB-BERT shape at small scale: inverted bottleneck 128 -> 256, 4 heads; MobileBERT shape: bottleneck
# 128 -> 32, 2 stacked FFNs, NoNorm + ReLU; same 4 layers, heads, embedding size and feature maps.
TEACHER = {
    "num_hidden_layers": 4,
    "hidden_size": 128,
    "intra_bottleneck_size": 256,
    "intermediate_size": 512,
    "embedding_size": 64,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
}
STUDENT = {
    "num_hidden_layers": 4,
    "hidden_size": 128,
    "intra_bottleneck_size": 32,
    "intermediate_size": 128,
    "embedding_size": 64,
    "num_attention_heads": 4,
    "num_feedforward_networks": 2,
    "max_position_embeddings": 128,
}
COMMON = [
    "--per_device_train_batch_size",
    "16",
    "--block_size",
    "128",
    "--logging_steps",
    "25",
    "--save_steps",
    "100",
    "--save_total_limit",
    "1",
    "--max_eval_blocks",
    "256",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--seed",
    "42",
    "--use_cpu",
    "true",
]


def _run(arguments: list[str]) -> dict:
    # The recipe owns its run folders: running it again starts each run over.
    command = [sys.executable, "-m", "compact_bert.cli.main", *arguments, "--overwrite_output_dir"]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    output_dir = Path(arguments[arguments.index("--output_dir") + 1])
    return json.loads((output_dir / "run_summary.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", type=Path, default=Path("runs/mobilebert_small"))
    parser.add_argument("--teacher_steps", type=int, default=400)
    parser.add_argument("--student_steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="Fine-tuning seeds.")
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR, help="Holds sst2/.")
    args = parser.parse_args(argv)
    check_data_dir(args.data_dir, ["sst2"])

    teacher_dir = args.output_dir / "teacher"
    teacher = _run(
        [
            "pretrain",
            "--preset",
            "ib-bert-large",
            "--model_overrides",
            json.dumps(TEACHER),
            "--output_dir",
            str(teacher_dir),
            "--max_steps",
            str(args.teacher_steps),
            "--learning_rate",
            "1e-3",
            "--warmup_steps",
            "40",
            *COMMON,
        ]
    )
    rows = []
    for strategy in ("akt", "jkt", "pkt"):
        summary = _run(
            [
                "distill",
                "mobilebert",
                "--teacher",
                str(teacher_dir),
                "--student_overrides",
                json.dumps(STUDENT),
                "--strategy",
                strategy,
                "--output_dir",
                str(args.output_dir / f"student_{strategy}"),
                "--max_steps",
                str(args.student_steps),
                "--learning_rate",
                "1e-3",
                "--warmup_steps",
                "20",
                *COMMON,
            ]
        )
        sst2 = finetune_seeds(
            args.output_dir / f"student_{strategy}",
            "sst2",
            args.data_dir,
            args.output_dir / f"student_{strategy}-sst2",
            args.seeds,
        )["values"]
        rows.append((strategy, summary, sst2))
    lines = [
        f"Teacher (IB-BERT-shaped, {args.teacher_steps} steps): held-out masked-token accuracy "
        f"{teacher['eval_masked_token_accuracy']:.3f}, MLM + NSP loss {teacher['eval_loss']:.3f} ({teacher['train_seconds']:.0f} s)",
        "",
        "| strategy | steps | held-out FMT loss | held-out AT loss | held-out MLM loss | masked-token accuracy | time "
        "| SST-2 dev accuracy per seed | mean ± std |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for strategy, summary, sst2 in rows:
        lines.append(
            f"| {strategy.upper()} | {summary['optimizer_steps']} | {summary['eval_feature_map_loss']:.4f} | "
            f"{summary['eval_attention_loss']:.4f} | {summary['eval_mlm_loss']:.3f} | "
            f"{summary['eval_masked_token_accuracy']:.3f} | {summary['train_seconds']:.0f} s | "
            f"{', '.join(f'{100 * value:.1f}' for value in sst2)} | {mean_and_spread(sst2)} |"
        )
    lines += [
        "",
        f"SST-2: first {TASKS['sst2'].max_train_samples} GLUE train sentences, 3 epochs, batch 32, lr 3e-4, "
        f"seeds {args.seeds}, GLUE dev set (872 sentences).",
    ]
    results = {strategy: {"distillation": summary, "sst2_accuracy": sst2} for strategy, summary, sst2 in rows}
    write_results(args.output_dir, "\n".join(lines), {"teacher": teacher, **results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
