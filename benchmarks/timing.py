"""Side-by-side latency measurement: candidates run interleaved, round after round, in one process, so
that machine noise hits all of them alike; ratios of medians are what the benchmarks report.

Each time is a ``Seconds``: the median, a float that the benchmarks compute with, carrying the minimum and
the 90th percentile of the same rounds. ``format_ratio`` prints both beside the median, so that one
disturbed round (a p90 far above the median) or a lucky one (a minimum far below it) shows in the output.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

from compact_bert.evaluation.runtime_latency import measure_interleaved_samples

__all__ = ["Seconds", "compare_latencies", "format_ratio", "format_seconds"]


class Seconds(float):
    """The median seconds per call, with ``minimum`` and ``p90`` (seconds) of the same rounds."""

    minimum: float
    p90: float

    def __new__(cls, milliseconds: list[float]) -> Seconds:
        ordered = sorted(milliseconds)
        seconds = super().__new__(cls, statistics.median(ordered) / 1e3)
        seconds.minimum = ordered[0] / 1e3
        seconds.p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))] / 1e3
        return seconds


def compare_latencies(
    candidates: dict[str, Callable[[], object]], rounds: int = 30, warmup: int = 3, inference: bool = True
) -> dict[str, Seconds]:
    """Seconds per call of each candidate, measured interleaved (under ``torch.inference_mode`` unless
    ``inference=False``, for training steps)."""
    with torch.inference_mode(inference):
        samples = measure_interleaved_samples(candidates, rounds, warmup)
    return {name: Seconds(values) for name, values in samples.items()}


def format_seconds(seconds: float) -> str:
    """``median ms`` and, for a measured ``Seconds``, ``[min …, p90 …]``."""
    text = f"{seconds * 1e3:.2f} ms"
    if isinstance(seconds, Seconds):
        text += f" [min {seconds.minimum * 1e3:.2f}, p90 {seconds.p90 * 1e3:.2f}]"
    return text


def format_ratio(label: str, numerator: float, denominator: float, target: str) -> str:
    """``label: a / b = r x`` with each side's median, minimum and p90; ``r`` is the ratio of medians."""
    ratio = numerator / denominator
    return f"{label}: {format_seconds(numerator)} / {format_seconds(denominator)} = {ratio:.2f}x (target {target})"
