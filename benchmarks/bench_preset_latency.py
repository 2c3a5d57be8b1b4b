"""Latency of every preset's base model: batch 1, 128 tokens, eager PyTorch on this CPU, eval mode, random
weights, median of interleaved rounds. Prints the Markdown rows used by the README's model zoo table: the
default inference path (``"auto"``: the dense and expert implementations this machine's probe chose, see
``modeling/implementation_probe.py``) and, timed in the same rounds, the previous default (oneDNN fused dense layers
from a fixed 2^25 multiply-adds per call, oneDNN-packed experts) and the plain path (``"eager"``: every linear map
an ``nn.Linear`` call, the per-expert loop), with the ratios.

moe-bert-base (3.68B parameters, 14.7 GB of fp32 weights) is skipped: it does not fit comfortably in this
machine's 24 GB next to the others. Run: ``python benchmarks/bench_preset_latency.py [PRESET ...]`` (default:
every preset).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import torch
from transformers import AutoModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import PREVIOUS_DEFAULT, compare_latencies, on_plain_path, with_implementations

import compact_bert  # noqa: F401
from compact_bert.configuration import PRESETS, preset_config

SKIPPED = {"moe-bert-base": "3.68B parameters (14.7 GB fp32) do not fit comfortably in 24 GB RAM"}


def _median_latencies(name: str, input_ids: torch.Tensor) -> dict[str, float]:
    """Seconds per forward pass on the default, the previous default and the plain path; the model is freed when
    this returns."""
    model = AutoModel.from_config(preset_config(name)).eval()
    call = lambda: model(input_ids=input_ids)
    previous = with_implementations(model, call, dense=PREVIOUS_DEFAULT, moe="onednn")
    candidates = {"default": call, "previous": previous, "plain": on_plain_path(model, call)}
    return compare_latencies(candidates, rounds=15, warmup=2)


def main(names: list[str]) -> None:
    unknown = [name for name in names if name not in PRESETS]
    if unknown:
        raise SystemExit(f"Unknown preset(s) {', '.join(unknown)}; valid presets: {', '.join(PRESETS)}.")
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch 1 x 128 tokens")
    input_ids = torch.randint(1000, 30000, (1, 128))
    print(
        "| preset | latency (ms) | previous default (ms) | plain path (ms) | default / previous | default / plain |\n"
        "|---|---|---|---|---|---|"
    )
    for name in names or PRESETS:
        if name in SKIPPED:
            print(f"| {name} | - ({SKIPPED[name]}) | | | | |")
            continue
        times = _median_latencies(name, input_ids)
        default, previous, plain = (times[key] * 1e3 for key in ("default", "previous", "plain"))
        print(
            f"| {name} | {default:.1f} | {previous:.1f} | {plain:.1f} | {default / previous:.2f}x | "
            f"{default / plain:.2f}x |",
            flush=True,
        )
        gc.collect()


if __name__ == "__main__":
    main(sys.argv[1:])
