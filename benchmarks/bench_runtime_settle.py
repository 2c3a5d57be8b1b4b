"""Why ``evaluation.runtime_latency`` sleeps before each runner: the ONNX Runtime latency of a tiny student right after
a PyTorch forward, with and without that pause, printed side by side.

PyTorch's OpenMP workers keep spinning for milliseconds after a forward; an onnxruntime call that starts while they
spin shares the cores with them. A teacher's call (~18 ms) outlasts the spin, a tiny student's (~4.5 ms) does not,
so without a pause the student's ONNX latency ratio is inflated by the runner order alone. This script times the
packaged teacher (all-MiniLM-L6-v2, 6 layers of 384 channels) and a 3-layer student of 320 channels, 10 heads and 448
FFN neurons (random weights: latency does not depend on their values), each eager and in ONNX Runtime in its fastest
exported form (``compact-bert export``'s BERT-layout graph), interleaved in one process in the order the tiny-student
study uses (teacher eager, teacher ONNX, student eager, student ONNX), with ``settle_ms`` 0 and the default
``SETTLE_MS``, the two settings alternating so that the machine's noise hits both alike.

Run: ``python benchmarks/bench_runtime_settle.py`` (about a minute on 2 cores, most of it exporting; ``--rounds``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    import torch
    import transformers

    from compact_bert.distillation.teachers import resolve_model_path
    from compact_bert.evaluation.runtime_latency import (
        SETTLE_MS,
        device_description,
        eager_runner,
        latency_inputs,
        measure_interleaved,
        onnxruntime_runner,
    )
    from compact_bert.export.bert_onnx import fastest_onnx_file
    from compact_bert.export.onnx_exporter import export_onnx

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="Timed rounds per setting and repeat (20).")
    parser.add_argument("--repeats", type=int, default=3, help="Alternations of the two settings (3).")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        parser.error(f"--rounds and --repeats must be at least 1, got {args.rounds} and {args.repeats}.")

    teacher_config = transformers.AutoConfig.from_pretrained(resolve_model_path("all-MiniLM-L6-v2"), num_labels=2)
    student_config = transformers.AutoConfig.from_pretrained(
        resolve_model_path("all-MiniLM-L6-v2"),
        num_labels=2,
        num_hidden_layers=3,
        hidden_size=320,
        num_attention_heads=10,
        intermediate_size=448,
    )
    inputs = latency_inputs(teacher_config.vocab_size, 1, 128)
    runners = {}
    with tempfile.TemporaryDirectory(prefix="bench-runtime-settle-") as scratch:
        for role, config in (("teacher", teacher_config), ("student", student_config)):
            torch.manual_seed(0)
            model = transformers.BertForSequenceClassification(config).eval()
            model.save_pretrained(Path(scratch) / role)
            export_onnx(Path(scratch) / role, Path(scratch) / f"{role}-onnx", "text-classification")
            runners[f"{role} eager"] = eager_runner(model, inputs, optimize=True)
            runners[f"{role} onnx"] = onnxruntime_runner(fastest_onnx_file(Path(scratch) / f"{role}-onnx"), inputs)
        print(device_description())
        print(
            "settle_ms | teacher eager ms | student eager ms | eager ratio | teacher ONNX ms | student ONNX ms | ONNX ratio"
        )
        for _ in range(args.repeats):
            for settle_ms in (0.0, SETTLE_MS):
                measured = measure_interleaved(runners, rounds=args.rounds, settle_ms=settle_ms)
                cells = []
                for runtime in ("eager", "onnx"):
                    teacher, student = (measured[f"{role} {runtime}"].median_ms for role in ("teacher", "student"))
                    cells += [f"{teacher:.2f}", f"{student:.2f}", f"{student / teacher:.3f}"]
                print(f"{settle_ms:g} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
