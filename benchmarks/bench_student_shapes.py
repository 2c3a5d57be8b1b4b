"""The main job's candidate student shapes, timed side by side on the paths they ship on.

The candidates of ``examples/student_selection.py`` that differ in shape: the dense 3-layer MiniLM (the main job's
default), its MiniMoE twin with 4 upcycled experts (each a copy of the FFN, 1,536 neurons) and the MiniMoE split
MoEBERT-style into 4 experts of 384 neurons (a quarter of the FFN each). Batch 1 x 128 tokens, random weights
(latency does not depend on their values, but routing does: random routers spread tokens about evenly, as the
teacher-initialized routers do at the start), classifier heads as the main job ships them. Every model runs on:

- eager: compact-bert's CPU inference path, ``optimize_for_inference``;
- ONNX Runtime fp32 and dynamic int8: exported by ``export_module_with_dynamo`` (MoE experts in the routed form)
  and ``quantize_onnx_file``.

All runners of all models run interleaved in one process; printed: each one's median [min, p90] ms and its ratio
to the dense student on the same path. The main job's rule (docs/students.md): the most accurate student at
<= 1.1x the dense student's latency in eager and in ONNX Runtime.

Run: ``python benchmarks/bench_student_shapes.py`` (about 3 minutes on 2 cores; ``--quick``: a smoke run).
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import Seconds, format_ratio

from compact_bert import optimize_for_inference
from compact_bert.configuration import preset_config
from compact_bert.evaluation.runtime_latency import (
    device_description,
    latency_inputs,
    measure_interleaved_samples,
    onnxruntime_runner,
)
from compact_bert.export.onnx_exporter import export_module_with_dynamo
from compact_bert.export.onnx_quantization import quantize_onnx_file

SHAPES = {
    "dense MiniLM 3L;384H": ("minilm-3l-384h", {}),
    "MiniMoE 3L;384H, 4 upcycled experts": ("minimoe-3l-384h", {}),
    "MiniMoE 3L;384H, 4 split experts of 384": ("minimoe-3l-384h", {"moe_intermediate_size": 384}),
}
DENSE = "dense MiniLM 3L;384H"
RUNTIMES = ("eager", "onnx", "onnx-int8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Few rounds: a smoke run whose numbers mean little.")
    arguments = parser.parse_args()
    rounds = 3 if arguments.quick else 40
    print(f"{device_description()}; torch {torch.__version__}, {torch.get_num_threads()} threads; batch 1 x 128")
    runners = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (preset, overrides) in SHAPES.items():
            torch.manual_seed(0)
            model = AutoModelForSequenceClassification.from_config(preset_config(preset, num_labels=2, **overrides))
            model.eval()
            inputs = latency_inputs(model.config.vocab_size, 1, 128)
            folder = Path(scratch) / preset / str(len(runners))
            folder.mkdir(parents=True)
            onnx_path, int8_path = folder / "model.onnx", folder / "model_quantized.onnx"
            example = latency_inputs(model.config.vocab_size, 2, 16, seed=1)
            export_module_with_dynamo(model, ("logits",), onnx_path, example)
            quantize_onnx_file(onnx_path, int8_path)
            fast = copy.deepcopy(model)
            optimize_for_inference(fast, tokens=inputs["input_ids"].numel(), measure=False)

            def eager(fast=fast, inputs=inputs):
                with torch.inference_mode():
                    return fast(**inputs)

            runners[(name, "eager")] = eager
            runners[(name, "onnx")] = onnxruntime_runner(onnx_path, inputs)
            runners[(name, "onnx-int8")] = onnxruntime_runner(int8_path, inputs)
        times = {key: Seconds(values) for key, values in measure_interleaved_samples(runners, rounds, 3).items()}
    for runtime in RUNTIMES:
        for name in SHAPES:
            print(
                format_ratio(f"{runtime:9} {name} / dense", times[(name, runtime)], times[(DENSE, runtime)], "<= 1.1x")
            )


if __name__ == "__main__":
    main()
