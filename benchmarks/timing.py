"""Side-by-side latency measurement: candidates run interleaved, round after round, in one process, so
that machine noise hits all of them alike; ratios of medians are what the benchmarks report."""

from __future__ import annotations

from collections.abc import Callable

import torch

from compact_bert.evaluation.runtime_latency import measure_interleaved
from compact_bert.modeling.packed_weights import weight_packing

__all__ = ["compare_latencies", "format_ratio", "on_plain_path"]


def compare_latencies(
    candidates: dict[str, Callable[[], object]], rounds: int = 30, warmup: int = 3, inference: bool = True
) -> dict[str, float]:
    """Median seconds per call of each candidate, measured interleaved (under ``torch.inference_mode``
    unless ``inference=False``, for training steps)."""
    with torch.inference_mode(inference):
        measured = measure_interleaved(candidates, rounds, warmup)
    return {name: latency.median_ms / 1e3 for name, latency in measured.items()}


def format_ratio(label: str, numerator: float, denominator: float, target: str) -> str:
    return f"{label}: {numerator * 1e3:.2f} ms / {denominator * 1e3:.2f} ms = {numerator / denominator:.2f}x (target {target})"


def on_plain_path(call: Callable[[], object]) -> Callable[[], object]:
    """``call`` with packed weights and fused layers switched off (``weight_packing(False)``): every linear map
    an ``nn.Linear`` / ``F.linear`` call."""

    def run():
        with weight_packing(False):
            return call()

    return run
