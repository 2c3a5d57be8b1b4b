"""Whole-model latency, batch 1, 128 tokens, eager PyTorch on CPU, side by side in one run.

1. Our MobileBERT vs transformers' MobileBertModel with the same weights (target <= 1.0x, aim 0.8x);
   the outputs are checked to match first.
2. MiniMoE 4L;384H with 4 experts vs its dense MiniLM counterpart (target <= 1.15x).

Run: ``python benchmarks/bench_model_latency.py``
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import MobileBertConfig, MobileBertModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies, format_ratio  # noqa: E402

import compact_bert  # noqa: E402
from compact_bert.configuration import preset_config  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    input_ids = torch.randint(1, 30522, (1, 128))

    reference = MobileBertModel(MobileBertConfig()).eval()
    ours = compact_bert.CompactMobileBertModel(preset_config("mobilebert")).eval()
    ours.load_state_dict(reference.state_dict())
    with torch.inference_mode():
        difference = (ours(input_ids=input_ids).last_hidden_state - reference(input_ids=input_ids).last_hidden_state)
    print(f"MobileBERT outputs: max |ours - transformers| = {difference.abs().max().item():.2e}")
    times = compare_latencies(
        {"ours": lambda: ours(input_ids=input_ids), "transformers": lambda: reference(input_ids=input_ids)}
    )
    print(format_ratio("MobileBERT ours vs transformers", times["ours"], times["transformers"], "<= 1.0x, aim 0.8x"))

    sparse = compact_bert.MiniMoEModel(preset_config("minimoe-4l-384h")).eval()
    dense = compact_bert.MiniMoEModel(preset_config("minilm-4l-384h")).eval()
    times = compare_latencies({"moe": lambda: sparse(input_ids=input_ids), "dense": lambda: dense(input_ids=input_ids)})
    print(format_ratio("MiniMoE 4L;384H 1,4E vs dense 1,1E", times["moe"], times["dense"], "<= 1.15x"))


if __name__ == "__main__":
    main()
