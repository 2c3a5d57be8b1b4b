"""The benchmarks' timing helper: the median is what ratios use, the minimum and p90 are printed beside it."""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path

import pytest

TIMING = Path(__file__).resolve().parents[2] / "benchmarks" / "timing.py"


@pytest.fixture(scope="module")
def timing():
    spec = importlib.util.spec_from_file_location("benchmark_timing", TIMING)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seconds_is_the_median_and_carries_the_minimum_and_p90(timing):
    seconds = timing.Seconds([5.0, 1.0, 3.0, 2.0, 4.0, 100.0, 2.5, 3.5, 4.5, 1.5, 2.0])
    assert seconds == pytest.approx(0.003) and seconds.minimum == pytest.approx(0.001)
    assert seconds.p90 == pytest.approx(0.005)  # the 10th of 11 sorted samples: one disturbed round is not it
    assert seconds * 2 == pytest.approx(0.006)  # a float to the benchmarks' arithmetic


def test_a_disturbed_round_shows_in_the_printed_ratio(timing):
    def steady():
        time.sleep(0.001)

    calls = {"count": 0}

    def once_disturbed():
        calls["count"] += 1
        time.sleep(0.05 if calls["count"] == 5 else 0.001)  # the timed call of round 2

    times = timing.compare_latencies({"steady": steady, "disturbed": once_disturbed}, rounds=3, warmup=1)
    assert set(times) == {"steady", "disturbed"} and all(isinstance(value, timing.Seconds) for value in times.values())
    line = timing.format_ratio("disturbed vs steady", times["disturbed"], times["steady"], "report")
    match = re.fullmatch(
        r"disturbed vs steady: ([\d.]+) ms \[min ([\d.]+), p90 ([\d.]+)\] / [\d.]+ ms \[min [\d.]+, p90 [\d.]+\] "
        r"= [\d.]+x \(target report\)",
        line,
    )
    assert match, line
    median, minimum, p90 = map(float, match.groups())
    assert minimum <= median < 20 and p90 >= 40  # the median hides the disturbed round; the p90 shows it
