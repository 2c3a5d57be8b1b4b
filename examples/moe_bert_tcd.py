"""MoE-BERT pre-trained with transfer-capability distillation against the same MoE-BERT pre-trained without it
(MLM + balance loss only), both from the same vanilla BERT teacher, and that teacher itself: SST-2 dev accuracy
after full and after LoRA fine-tuning (paper 003's claim: TCD > no-TCD, and the MoE student with TCD can pass
its vanilla teacher).

Laptop scale (say which): the vanilla teacher is the packaged all-MiniLM-L6-v2 (6 layers, H=384, pre-trained
on far more text than any run here); the students are moe-bert-small (H=128, 2 heads, FFN 512, paper 003's
small width) with 6 layers instead of 12, so that student layer i aligns with teacher layer i, and 8 experts per
layer instead of 64. Both students see the same blocks of the bundled WikiText-2 slice in the same order with
the same masks (same seed); the no-TCD run sets λ_T = λ_I = λ_A = 0 and still computes (without training on)
the relation losses, so the table shows how far from the teacher's relations each student ends. Fine-tuning
(``downstream.py``): the first 8,000 GLUE SST-2 train sentences, 3 epochs, learning rate 3e-4 for full
fine-tuning and 1e-3 for LoRA (r = 8, the registered default targets: attention, FFN / experts), the GLUE dev
set, one run per ``--seeds`` value.

Run: ``python -m examples.moe_bert_tcd --output_dir runs/moe_bert_tcd``
(about an hour on 2 CPU cores).

``--start teacher`` asks the same question of students that start from the teacher: a width-reduced
MoE-BERT (6 layers, H=192, 6 heads, FFN 768, 8 experts; ``STUDENT_FROM_TEACHER``) initialized from all-MiniLM-L6-v2
by ``--init_from_teacher auto`` (layer i from layer i, the teacher's most important 192 channels, 6 heads and 768
FFN neurons, the FFN upcycled into every expert, routers balanced), then pre-trained with and without TCD exactly
as above. ``--modes full`` skips the LoRA column. Run:
``python -m examples.moe_bert_tcd --start teacher --modes full --output_dir
runs/moe_bert_tcd_teacher_init`` (about 30 minutes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from compact_bert.distillation.data import PACKAGED_TEACHER, packaged_teacher_dir

from .downstream import DEFAULT_DATA_DIR, TASKS, check_data_dir, finetune_seeds, mean_and_spread, write_results

__all__ = ["STUDENT", "main"]

STUDENT = {"num_hidden_layers": 6, "num_experts": 8}  # on top of the moe-bert-small preset
# A student the teacher can initialize: head size 32 like the teacher's (moe-bert-small's is 64).
STUDENT_FROM_TEACHER = {
    "num_hidden_layers": 6,
    "hidden_size": 192,
    "num_attention_heads": 6,
    "intermediate_size": 768,
    "num_experts": 8,
}
PRETRAINING = [
    "--per_device_train_batch_size",
    "8",
    "--block_size",
    "128",
    "--learning_rate",
    "1e-3",
    "--warmup_steps",
    "30",
    "--logging_steps",
    "25",
    "--save_steps",
    "100",
    "--save_total_limit",
    "1",
    "--max_eval_blocks",
    "64",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--seed",
    "42",
    "--use_cpu",
    "true",
]
STARTS = {
    # As the README's first table was measured: students from random weights (paper 003 pre-trains from scratch).
    "random": (STUDENT, ["--init_from_teacher", "none"]),
    "teacher": (STUDENT_FROM_TEACHER, ["--init_from_teacher", "auto"]),
}
WITHOUT_TCD = ["--trunk_weight", "0", "--inner_weight", "0", "--attention_weight", "0"]
FINETUNING = {"full": (), "LoRA": ("--peft", "lora", "--learning_rate", "1e-3")}


def _pretrain(output_dir: Path, steps: int, start: str, extra: list[str]) -> dict:
    student, start_flags = STARTS[start]
    command = [
        sys.executable,
        "-m",
        "compact_bert.cli.main",
        "distill",
        "tcd",
        "--teacher",
        PACKAGED_TEACHER,
        "--student_preset",
        "moe-bert-small",
        "--student_overrides",
        json.dumps(student),
        "--output_dir",
        str(output_dir),
        "--overwrite_output_dir",  # the recipe owns its run folders: running it again starts each run over
        "--max_steps",
        str(steps),
        *PRETRAINING,
        *start_flags,
        *extra,
    ]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    return json.loads((output_dir / "run_summary.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", type=Path, default=Path("runs/moe_bert_tcd"))
    parser.add_argument("--steps", type=int, default=300, help="Pre-training steps of each student.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="Fine-tuning seeds.")
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR, help="Holds sst2/.")
    parser.add_argument(
        "--start",
        choices=list(STARTS),
        default="random",
        help="Where both students start: random weights (paper 003) or the teacher's.",
    )
    parser.add_argument("--modes", nargs="+", choices=list(FINETUNING), default=list(FINETUNING))
    args = parser.parse_args(argv)
    check_data_dir(args.data_dir, ["sst2"])
    modes = {mode: FINETUNING[mode] for mode in args.modes}

    pretraining = {
        "MoE-BERT + TCD": _pretrain(args.output_dir / "student_tcd", args.steps, args.start, []),
        "MoE-BERT, no TCD": _pretrain(args.output_dir / "student_no_tcd", args.steps, args.start, WITHOUT_TCD),
    }
    models = {
        "MoE-BERT + TCD": args.output_dir / "student_tcd",
        "MoE-BERT, no TCD": args.output_dir / "student_no_tcd",
        f"vanilla teacher ({PACKAGED_TEACHER})": packaged_teacher_dir(),
    }
    scores = {
        name: {
            mode: finetune_seeds(
                folder,
                "sst2",
                args.data_dir,
                args.output_dir / f"{folder.name}-sst2-{mode.lower()}",
                args.seeds,
                flags,
            )["values"]
            for mode, flags in modes.items()
        }
        for name, folder in models.items()
    }
    lines = [
        f"Students: moe-bert-small with {json.dumps(STARTS[args.start][0])}, from "
        f"{'random weights' if args.start == 'random' else 'the teacher (--init_from_teacher auto)'}, {args.steps} "
        "steps x 8 blocks x 128 tokens each.",
        "",
        "| student | held-out MLM loss | masked-token accuracy | held-out trunk relation loss | held-out inner relation loss | time |",
        "|---|---|---|---|---|---|",
    ]
    for name, summary in pretraining.items():
        lines.append(
            f"| {name} | {summary['eval_mlm_loss']:.3f} | {summary['eval_masked_token_accuracy']:.3f} | "
            f"{summary['eval_trunk_loss']:.4f} | {summary['eval_inner_loss']:.4f} | {summary['train_seconds']:.0f} s |"
        )
    lines += [
        "",
        "| model | " + " | ".join(f"SST-2 dev acc., {mode} (per seed) | mean ± std" for mode in modes) + " |",
        "|---" * (1 + 2 * len(modes)) + "|",
    ]
    for name, by_mode in scores.items():
        cells = [
            f"{', '.join(f'{100 * value:.1f}' for value in by_mode[mode])} | {mean_and_spread(by_mode[mode])}"
            for mode in modes
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += [
        "",
        f"SST-2: first {TASKS['sst2'].max_train_samples} GLUE train sentences, 3 epochs, batch 32, lr 3e-4 "
        f"(full) / 1e-3 (LoRA r=8), seeds {args.seeds}, GLUE dev set (872 sentences).",
    ]
    write_results(args.output_dir, "\n".join(lines), {"pretraining": pretraining, "sst2_accuracy": scores})
    return 0


if __name__ == "__main__":
    sys.exit(main())
