"""Why ``evaluation.runtime_latency`` sleeps before each runner: the ONNX Runtime latency of a tiny student right after
a PyTorch forward, with and without that pause, printed side by side.

PyTorch's OpenMP workers keep spinning for milliseconds after a forward; an onnxruntime call that starts while they
spin shares the cores with them. A teacher's call (~18 ms) outlasts the spin, a tiny student's (~5 ms) does not,
so without a pause the student's ONNX latency ratio is inflated by the runner order alone. This script times the
packaged teacher (all-MiniLM-L6-v2, 6 layers of 384 channels) and the tiny-student study's 3-layer student of 320
channels, 10 heads and 448 FFN neurons (``3l-320h-448f``; random weights: latency does not depend on their values),
built, exported and run as ``bench_tiny_shapes.py`` does, each eager and in ONNX Runtime, interleaved in one process in the order the tiny-student
study uses (teacher eager, teacher ONNX, student eager, student ONNX), with ``settle_ms`` 0 and the default
``SETTLE_MS``, the two settings alternating so that the machine's noise hits both alike.

Run: ``python benchmarks/bench_runtime_settle.py`` (about a minute on 2 cores, most of it exporting; ``--rounds``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tiny_shapes import exported_runners, shape_configs, timing_arguments

STUDENT = "3l-320h-448f"


def main(argv: list[str] | None = None) -> None:
    from compact_bert.evaluation.runtime_latency import (
        SETTLE_MS,
        device_description,
        latency_inputs,
        measure_interleaved,
    )

    _, args = timing_arguments(argv, __doc__.split("\n\n")[0], 20, 3, "Alternations of the two settings")

    configs = shape_configs([STUDENT])
    inputs = latency_inputs(configs["teacher"].vocab_size, 1, 128)
    with tempfile.TemporaryDirectory(prefix="bench-runtime-settle-") as scratch:
        runners = exported_runners(configs, inputs, Path(scratch))
        print(device_description())
        print(
            "settle_ms | teacher eager ms | student eager ms | eager ratio | teacher ONNX ms | student ONNX ms | ONNX ratio"
        )
        for _ in range(args.repeats):
            for settle_ms in (0.0, SETTLE_MS):
                measured = measure_interleaved(runners, rounds=args.rounds, settle_ms=settle_ms)
                cells = []
                for runtime in ("eager", "onnx"):
                    teacher, student = (measured[f"{role} {runtime}"].median_ms for role in ("teacher", STUDENT))
                    cells += [f"{teacher:.2f}", f"{student:.2f}", f"{student / teacher:.3f}"]
                print(f"{settle_ms:g} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
