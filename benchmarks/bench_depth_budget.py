"""What ``--max_latency_ratio`` measures before training, printed: the teacher and the student at every depth below
the teacher's (and, for a dense preset, the narrower tiny-student shapes), side by side on compact-bert's eager path at batch
1 x 128 (``finetuning/depth_budget.py``).

Prints each depth's median, the least-squares line the choice reads (fixed ms + ms per layer: the floor that the
embeddings, the head and the per-call overhead put under any depth) and the depth chosen for the budget.

Run: ``python benchmarks/bench_depth_budget.py --max_latency_ratio 0.5`` (about 20 seconds on 2 cores; defaults:
student preset ``minilm-3l-384h``, teacher ``all-MiniLM-L6-v2``, 30 rounds).
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    from transformers import AutoConfig

    from compact_bert.configuration import preset_config
    from compact_bert.configuration.dense_students import is_dense_student
    from compact_bert.distillation.teachers import resolve_model_path
    from compact_bert.finetuning.depth_budget import deepest_student_within_budget

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--student_preset", default="minilm-3l-384h")
    parser.add_argument("--teacher", default="all-MiniLM-L6-v2")
    parser.add_argument("--max_latency_ratio", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    teacher = AutoConfig.from_pretrained(resolve_model_path(args.teacher))
    student = preset_config(args.student_preset)
    choice = deepest_student_within_budget(
        student, teacher, args.max_latency_ratio, rounds=args.rounds, narrow=is_dense_student(student)
    )
    print("measured medians (ms) by depth:", choice.measured_ms, f"teacher {choice.teacher_ms}")
    print(choice.reason)


if __name__ == "__main__":
    main()
