"""Deployment runtimes side by side: batch 1 x 128 tokens, eager PyTorch, ONNX Runtime fp32 / int8 and,
where the `tflite` extra is installed, LiteRT fp32 / dynamic-range int8, for

- our MobileBERT (preset ``mobilebert``, 25M parameters),
- MiniMoE 4L;384H (1,4E) and its dense twin MiniLM 4L;384H,
- BERT-base: transformers' own ``BertModel`` (bert-base-uncased's shape), the reference,

every model exported the same way (``export_module_with_dynamo`` / ``quantize_onnx_file`` / ``convert_to_tflite`` /
``quantize_tflite``: the code of ``compact-bert export``), base models (``last_hidden_state``), random weights
(latency does not depend on their values). All runners of all models run interleaved in one process
(``evaluation.runtime_latency``), with the same number of CPU threads. Printed: the latency table, MobileBERT's
speed-up over BERT-base per runtime (paper 001 Table 6: 5.5x on a Pixel 4 with TFLite), and the MoE / dense
ratio per runtime.

Run: ``python benchmarks/bench_runtimes.py`` (about 10 minutes on 2 cores, most of it exporting; ``--quick``
fewer rounds, ``--tiny`` 2-layer models: a smoke run whose numbers mean nothing).
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers import BertConfig, BertModel

import compact_bert  # noqa: F401  (registers the Auto classes)
from compact_bert.configuration import preset_config
from compact_bert.evaluation.runtime_latency import (
    device_description,
    eager_runner,
    latency_inputs,
    measure_interleaved,
    onnxruntime_runner,
    tflite_runner,
)
from compact_bert.export.onnx_exporter import export_module_with_dynamo
from compact_bert.export.onnx_quantization import quantize_onnx_file

OUTPUTS = ("last_hidden_state",)
BATCH, LENGTH = 1, 128


def build_models(tiny: bool) -> dict[str, torch.nn.Module]:
    from transformers import AutoModel

    torch.manual_seed(0)
    small = {"num_hidden_layers": 2} if tiny else {}
    return {
        "MobileBERT": AutoModel.from_config(preset_config("mobilebert", **small)),
        "MiniMoE 4L;384H": AutoModel.from_config(preset_config("minimoe-4l-384h", **small)),
        "MiniLM 4L;384H": AutoModel.from_config(preset_config("minilm-4l-384h", **small)),
        "BERT-base": BertModel(BertConfig(**small), add_pooling_layer=False),
    }


def export_all(name: str, model: torch.nn.Module, folder: Path, with_tflite: bool) -> dict[str, Path]:
    """The model's files for every runtime, written by the project's own export code."""
    files = {"onnx": folder / "model.onnx", "onnx-int8": folder / "model_quantized.onnx"}
    started = time.perf_counter()
    export_module_with_dynamo(model, OUTPUTS, files["onnx"], latency_inputs(model.config.vocab_size, 2, 16, seed=1))
    seconds = {"onnx": time.perf_counter() - started}
    quantize_onnx_file(files["onnx"], files["onnx-int8"])
    if with_tflite:
        from compact_bert.export.tflite_exporter import convert_to_tflite, quantize_tflite

        files["tflite"], files["tflite-int8"] = folder / "model.tflite", folder / "model_int8.tflite"
        started = time.perf_counter()
        convert_to_tflite(
            model, OUTPUTS, latency_inputs(model.config.vocab_size, BATCH, LENGTH, seed=1), files["tflite"]
        )
        seconds["tflite"] = time.perf_counter() - started
        quantize_tflite(files["tflite"], files["tflite-int8"])
    sizes = ", ".join(f"{runtime} {path.stat().st_size / 1e6:.1f} MB" for runtime, path in files.items())
    took = ", ".join(f"{runtime} {value:.1f} s" for runtime, value in seconds.items())
    print(f"{name}: exported ({sizes}; export / conversion time {took})", flush=True)
    return files


def _fp32_difference(runners: dict, name: str, eager_output: np.ndarray) -> str:
    """Largest |runtime − eager| of the fp32 files on the timed input: the speed is that of a correct model."""
    parts = []
    for runtime in ("onnx", "tflite"):
        if (name, runtime) in runners:
            produced = runners[(name, runtime)]()
            array = produced["last_hidden_state"] if isinstance(produced, dict) else produced[0]
            parts.append(f"{runtime} {np.abs(array - eager_output).max():.1e}")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="Threads of every runtime.")
    parser.add_argument("--quick", action="store_true", help="5 rounds.")
    parser.add_argument("--tiny", action="store_true", help="2-layer models (smoke run).")
    parser.add_argument(
        "--work_dir", type=Path, default=None, help="Keep the exported files here (default: a temp dir)."
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with_tflite = all(
        importlib.util.find_spec(module) for module in ("litert_torch", "ai_edge_litert", "ai_edge_quantizer")
    )
    if not with_tflite:
        print(
            "TFLite columns skipped: litert-torch / ai-edge-litert / ai-edge-quantizer not installed (the `tflite` extra)."
        )
    runtimes = ["eager", "onnx", "onnx-int8"] + (["tflite", "tflite-int8"] if with_tflite else [])
    print(f"{device_description()}; {args.threads} threads in every runtime; batch {BATCH} x {LENGTH} tokens")
    with tempfile.TemporaryDirectory() as scratch:
        work_dir = args.work_dir or Path(scratch)
        runners = {}
        for name, model in build_models(args.tiny).items():
            model.eval()
            folder = work_dir / name.replace(" ", "_").replace(";", "_")
            folder.mkdir(parents=True, exist_ok=True)
            files = export_all(name, model, folder, with_tflite)
            inputs = latency_inputs(model.config.vocab_size, BATCH, LENGTH)
            runners[(name, "eager")] = eager_runner(model, inputs)
            for runtime, path in files.items():
                maker = onnxruntime_runner if runtime.startswith("onnx") else tflite_runner
                runners[(name, runtime)] = maker(path, inputs, args.threads)
            eager_output = runners[(name, "eager")]().last_hidden_state.numpy()
            print(
                f"{name}: max |fp32 runtime - eager| on the timed input: {_fp32_difference(runners, name, eager_output)}"
            )
        rounds = 5 if args.quick else args.rounds
        measured = measure_interleaved(runners, rounds=rounds, warmup=3)
    models = list(dict.fromkeys(name for name, _ in runners))
    print(f"\nLatency, ms per call (median of {rounds} interleaved rounds; p90 in brackets):")
    print("| model | " + " | ".join(runtimes) + " |")
    print("|---|" + "---|" * len(runtimes))
    for name in models:
        cells = [
            f"{measured[(name, runtime)].median_ms:.1f} ({measured[(name, runtime)].p90_ms:.1f})"
            for runtime in runtimes
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")

    def ratio_row(label: str, numerator: str, denominator: str) -> str:
        ratios = [
            measured[(numerator, runtime)].median_ms / measured[(denominator, runtime)].median_ms
            for runtime in runtimes
        ]
        return f"| {label} | " + " | ".join(f"{value:.2f}x" for value in ratios) + " |"

    print("\nRatios per runtime:")
    print("| ratio | " + " | ".join(runtimes) + " |")
    print("|---|" + "---|" * len(runtimes))
    print(
        ratio_row(
            "MobileBERT speed-up over BERT-base (BERT-base ms / MobileBERT ms; paper 001: 5.5x on a Pixel 4)",
            "BERT-base",
            "MobileBERT",
        )
    )
    print(ratio_row("MiniMoE 4L;384H / its dense twin MiniLM 4L;384H (ms / ms)", "MiniMoE 4L;384H", "MiniLM 4L;384H"))


if __name__ == "__main__":
    main()
