"""Latency of every preset's base model: batch 1, 128 tokens, eager PyTorch on this CPU, eval mode, random
weights, median of interleaved rounds. Prints the Markdown rows used by the README's model zoo table: compact-bert's
inference path (the model after ``compact_bert.optimize_for_inference``: oneDNN-packed, fused projections and experts
where they measure faster here) and, timed in the same rounds, the model as its file defines it (``nn.Linear``
modules; on transformers 5 the experts through its default experts implementation), with the ratio.

moe-bert-base (3.68B parameters, 14.7 GB of fp32 weights) is skipped: it does not fit comfortably in this
machine's 24 GB next to the others. Run: ``python benchmarks/bench_preset_latency.py [PRESET ...]`` (default:
every preset).
"""

from __future__ import annotations

import copy
import gc
import sys
from pathlib import Path

import torch
from transformers import AutoModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies

from compact_bert import optimize_for_inference
from compact_bert.configuration import PRESETS, preset_config

SKIPPED = {"moe-bert-base": "3.68B parameters (14.7 GB fp32) do not fit comfortably in 24 GB RAM"}


def _median_latencies(name: str, input_ids: torch.Tensor) -> dict[str, float]:
    """Seconds per forward pass on the optimized and the plain path; the models are freed when this returns."""
    plain = AutoModel.from_config(preset_config(name)).eval()
    optimized = copy.deepcopy(plain)
    optimize_for_inference(optimized, tokens=input_ids.numel())
    candidates = {"optimized": lambda: optimized(input_ids=input_ids), "plain": lambda: plain(input_ids=input_ids)}
    return compare_latencies(candidates, rounds=15, warmup=2)


def main(names: list[str]) -> None:
    unknown = [name for name in names if name not in PRESETS]
    if unknown:
        raise SystemExit(f"Unknown preset(s) {', '.join(unknown)}; valid presets: {', '.join(PRESETS)}.")
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch 1 x 128 tokens")
    input_ids = torch.randint(1000, 30000, (1, 128))
    print("| preset | optimized (ms) | plain (ms) | optimized / plain |\n|---|---|---|---|")
    for name in names or PRESETS:
        if name in SKIPPED:
            print(f"| {name} | - ({SKIPPED[name]}) | | |")
            continue
        times = _median_latencies(name, input_ids)
        optimized, plain = (times[key] * 1e3 for key in ("optimized", "plain"))
        print(f"| {name} | {optimized:.1f} | {plain:.1f} | {optimized / plain:.2f}x |", flush=True)
        gc.collect()


if __name__ == "__main__":
    main(sys.argv[1:])
