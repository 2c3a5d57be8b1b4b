"""The MoE benchmark scripts run end to end (smoke runs: tiny models, few rounds; their numbers mean nothing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="the MoE benchmarks time ONNX Runtime (the `export` extra)")

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _run(*arguments: str) -> str:
    result = subprocess.run(
        [sys.executable, *arguments], capture_output=True, text=True, timeout=600, cwd=BENCHMARKS.parent
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


def test_the_moe_targets_benchmark_prints_every_row():
    printed = _run(str(BENCHMARKS / "bench_moe_targets.py"), "--quick", "--tiny", "--no_compile")
    for row in ("1. ", "2. ", "3. ", "4. "):
        assert row in printed, printed[-3000:]
    assert "floor: the MoE model with routing and dispatch free" in printed


def test_the_ort_moe_operator_benchmark_checks_its_activation_and_speed():
    printed = _run(str(BENCHMARKS / "bench_ort_moe_operator.py"), "--rounds", "2")
    assert "with exact GELU: max |difference|" in printed and "MoE operator / dense FFN:" in printed
