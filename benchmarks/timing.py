"""Side-by-side latency measurement: candidates run interleaved, round after round, in one process, so
that machine noise hits all of them alike; ratios of medians are what the benchmarks report."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

__all__ = ["compare_latencies", "format_ratio"]


def compare_latencies(
    candidates: dict[str, Callable[[], object]], rounds: int = 30, warmup: int = 3, inference: bool = True
) -> dict[str, float]:
    """Median seconds per call of each candidate, measured interleaved (under ``torch.inference_mode``
    unless ``inference=False``, for training steps)."""
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    with torch.inference_mode(inference):
        for _ in range(warmup):
            for function in candidates.values():
                function()
        for _ in range(rounds):
            for name, function in candidates.items():
                start = time.perf_counter()
                function()
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def format_ratio(label: str, numerator: float, denominator: float, target: str) -> str:
    return f"{label}: {numerator * 1e3:.2f} ms / {denominator * 1e3:.2f} ms = {numerator / denominator:.2f}x (target {target})"
