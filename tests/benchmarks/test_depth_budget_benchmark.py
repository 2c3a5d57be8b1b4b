"""``benchmarks/bench_depth_budget.py`` runs end to end (a smoke run: few rounds; its numbers mean nothing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "bench_depth_budget.py"


def test_the_depth_budget_benchmark_prints_every_depth_and_its_choice():
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--rounds", "2", "--max_latency_ratio", "1.0"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCHMARK.parents[1],
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "measured medians (ms) by depth: {1: " in result.stdout and ", 5: " in result.stdout
    # which depth fits depends on this machine's timings (5 on an idle one): a choice is printed with its reason
    assert re.search(r"[1-5] layers[^:]*: the deepest student within 1.0x", result.stdout)
    # the tiny shapes are measured too, the wider first
    assert "3 layers of 320 channels, 10 heads and 640 FFN neurons" in result.stdout
    assert "3 layers of 320 channels, 10 heads and 448 FFN neurons" in result.stdout
    assert "3 layers of 288 channels, 9 heads and 576 FFN neurons" in result.stdout
    assert "3 layers of 256 channels, 8 heads and 768 FFN neurons" in result.stdout
