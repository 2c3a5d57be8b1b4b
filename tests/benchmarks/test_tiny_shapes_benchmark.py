"""``benchmarks/bench_tiny_shapes.py`` runs end to end (a smoke run: one shape, one round; its numbers mean nothing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "bench_tiny_shapes.py"


def test_the_tiny_shapes_benchmark_prints_each_shapes_eager_and_onnx_ratio_per_repeat():
    pytest.importorskip("onnxruntime")
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--shapes", "3l-320h-448f", "--rounds", "1", "--repeats", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCHMARK.parents[1],
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert re.search(r"^teacher: eager [\d.]+, [\d.]+ ms \| ONNX Runtime [\d.]+, [\d.]+ ms$", result.stdout, re.M)
    row = re.search(r"^3l-320h-448f \| ([\d.]+), ([\d.]+) \| ([\d.]+), ([\d.]+)$", result.stdout, re.M)
    assert row, result.stdout
    assert all(float(ratio) > 0 for ratio in row.groups())


def test_the_tiny_shapes_benchmark_names_the_valid_shapes_for_an_unknown_one():
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--shapes", "3l-999h"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCHMARK.parents[1],
    )
    assert result.returncode == 2 and "invalid choice: '3l-999h'" in result.stderr and "3l-320h-448f" in result.stderr
