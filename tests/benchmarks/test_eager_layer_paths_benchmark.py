"""``benchmarks/bench_eager_layer_paths.py`` runs end to end (a smoke run: one round; its numbers mean nothing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import transformers

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "bench_eager_layer_paths.py"
PATHS = ("plain", "every-swap", "compact-bert", "fused-qkv", "native-layer")
TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) >= 5


def _run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCHMARK), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCHMARK.parents[1],
    )


@pytest.mark.skipif(not TRANSFORMERS_5, reason="the benchmark's two modified paths wrap transformers 5's BERT modules")
def test_the_layer_paths_benchmark_prints_every_paths_times_and_ratios_per_repeat():
    result = _run("--rounds", "1", "--repeats", "2")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    paths = len(PATHS)
    rows = re.findall(rf"^((?:[\d.]+ \| ){{{3 * paths}}}[\d.]+)$", result.stdout, flags=re.MULTILINE)
    assert len(rows) == 2, result.stdout
    for row in rows:  # each path's teacher ms, then student ms, then ratio; then fastest over fastest
        values = [float(cell) for cell in row.split(" | ")]
        teacher, student, ratios = values[:paths], values[paths : 2 * paths], values[2 * paths : 3 * paths]
        fastest = values[-1]
        assert all(value > 0 for value in values)
        assert ratios == pytest.approx([s / t for s, t in zip(student, teacher, strict=True)], abs=2e-3)
        assert fastest == pytest.approx(min(student) / min(teacher), abs=2e-3)


@pytest.mark.skipif(TRANSFORMERS_5, reason="the refusal is for transformers 4, whose BERT modules differ")
def test_the_layer_paths_benchmark_refuses_transformers_4_and_says_why():
    result = _run("--rounds", "1")
    assert result.returncode == 2 and "wrap transformers 5's BERT modules" in result.stderr


def test_the_layer_paths_benchmark_refuses_zero_repeats_before_building_anything():
    result = _run("--repeats", "0")
    assert result.returncode == 2 and "--rounds and --repeats must be at least 1, got 30 and 0." in result.stderr
