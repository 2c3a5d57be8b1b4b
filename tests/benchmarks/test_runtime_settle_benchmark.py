"""``benchmarks/bench_runtime_settle.py`` runs end to end (a smoke run: one round; its numbers mean nothing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from compact_bert.evaluation.runtime_latency import SETTLE_MS

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "bench_runtime_settle.py"


def test_the_settle_benchmark_prints_both_settings_with_eager_and_onnx_ratios():
    pytest.importorskip("onnxruntime")
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--rounds", "1", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCHMARK.parents[1],
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    rows = re.findall(r"^(\d+(?:\.\d+)?) \| (.+)$", result.stdout, flags=re.MULTILINE)
    assert [settle for settle, _ in rows] == ["0", f"{SETTLE_MS:g}"]
    for _, cells in rows:  # teacher and student ms and their ratio, eager then ONNX Runtime: six positive numbers
        values = [float(cell) for cell in cells.split(" | ")]
        assert len(values) == 6 and all(value > 0 for value in values)
        assert values[2] == pytest.approx(values[1] / values[0], abs=2e-3)
        assert values[5] == pytest.approx(values[4] / values[3], abs=2e-3)


def test_the_settle_benchmark_refuses_zero_rounds_before_exporting_anything():
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--rounds", "0"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 2 and "--rounds and --repeats must be at least 1, got 0 and 3." in result.stderr
