"""The targets for MoE inference, measured side by side in one run on this machine (min / median / p90).

Every row times its candidates interleaved, round after round (``timing.compare_latencies``,
``evaluation.runtime_latency.measure_interleaved_samples``), and prints the ratio of medians with each side's
minimum and 90th percentile. "Eager" is compact-bert's CPU inference path for both sides of a ratio: the model after
``optimize_for_inference`` (oneDNN-packed projections and experts); the plain model file's time is printed beside it.

1. One 4-expert layer (d 384, FFN 1,536), 128 tokens, against its no-routing floor: the experts' products alone over
   pre-sorted equal slices on the same packed matrices (target <= 1.10x). The router alone and the experts module
   alone are printed too, so that the routing and the dispatch each show what they cost.
2. MiniMoE 3L;384H (4 experts) against its dense twin MiniLM 3L;384H, eager, batch 1 x 128 (target <= 1.15x) and
   batch 32 x 128 (target <= 1.05x).
3. The same pair in ONNX Runtime, fp32 and dynamic int8, batch 1 x 128 (target <= 1.25x), exported by the project's
   own code (``export_module_with_dynamo``: the routed expert form), parity with PyTorch printed; and in LiteRT fp32
   (target <= 1.5x) where the ``tflite`` extra is installed: the static form (every expert for every token, exact),
   and the capacity form of the model with ``eval_capacity_factor`` 1.25 (``export tflite --capacity_factor``).
4. 64 experts (d 768, FFN 3,072), 128 tokens: the layer against the weight-read floor, one streaming read of the
   weights of the experts the batch uses (target >= 85% of the floor's speed).
5. MiniMoE 3L;384H compiled (inductor, freezing, dynamic shapes) against itself eager, batch 1 x 128
   (target <= 1.0x); ``--no_compile`` skips it.

Run: ``python benchmarks/bench_moe_targets.py`` (about 10 minutes on 2 cores; ``--quick`` few rounds and ``--tiny``
small models are smoke runs whose numbers mean nothing).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_moe_layer import _experts_only, _layer, _optimized, _read_weights
from timing import Seconds, compare_latencies, format_ratio

from compact_bert import optimize_for_inference
from compact_bert.configuration import preset_config
from compact_bert.evaluation.runtime_latency import (
    device_description,
    latency_inputs,
    measure_interleaved_samples,
    onnxruntime_runner,
    tflite_runner,
)
from compact_bert.export.onnx_exporter import export_module_with_dynamo
from compact_bert.export.onnx_quantization import quantize_onnx_file

PAIR = ("minimoe-3l-384h", "minilm-3l-384h")
# The LiteRT capacity form's factor: Switch Transformers' usual inference capacity.
CAPACITY_FACTOR = 1.25


def layer_case(rounds: int, tiny: bool) -> None:
    experts, hidden, ffn = (4, 48, 96) if tiny else (4, 384, 1536)
    layer = _layer(experts, hidden, ffn)
    optimized = _optimized(layer)
    tokens, mask = torch.randn(1, 128, hidden), torch.ones(1, 128, dtype=torch.bool)
    flat = tokens.reshape(-1, hidden)
    with torch.inference_mode():
        routing = optimized.router(tokens, mask, None)
    index, weight = routing.expert_index.unsqueeze(-1), routing.weight.unsqueeze(-1)
    floor = _experts_only(layer)
    counts = torch.bincount(routing.expert_index, minlength=experts).tolist()
    routed_floor = _experts_only(layer, counts)
    times = compare_latencies(
        {
            "layer": lambda: optimized(tokens, mask, None),
            "floor": lambda: floor(tokens),
            "routed_floor": lambda: routed_floor(tokens),
            "router": lambda: optimized.router(tokens, mask, None),
            "experts": lambda: optimized.experts(flat, index, weight),
            "plain": lambda: layer(tokens, mask, None),
        },
        rounds=rounds,
    )
    print(
        format_ratio(
            f"1. {experts}-expert layer, d {hidden}, FFN {ffn}, 128 tokens vs its no-routing floor",
            times["layer"],
            times["floor"],
            "<= 1.10x",
        )
    )
    print(
        format_ratio(
            f"   floor at this routing's slice sizes {counts} / floor at equal slices",
            times["routed_floor"],
            times["floor"],
            "report",
        )
    )
    print(format_ratio("   layer / floor at this routing's slices", times["layer"], times["routed_floor"], "report"))
    print(format_ratio("   router alone / floor", times["router"], times["floor"], "report"))
    print(
        format_ratio(
            "   experts module alone (dispatch + products) / floor", times["experts"], times["floor"], "report"
        )
    )
    print(format_ratio("   plain model file's layer / floor", times["plain"], times["floor"], "report"))


def _pair(tiny: bool) -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    small = (
        {"num_hidden_layers": 1, "hidden_size": 96, "num_attention_heads": 3, "intermediate_size": 384} if tiny else {}
    )
    return {name: AutoModel.from_config(preset_config(name, **small)).eval() for name in PAIR}


class _NoRoutingFeedForward(torch.nn.Module):
    """An MoE FFN block at its floor: the experts' packed products over equal pre-sorted slices of the tokens, the
    routing returned as computed once beforehand (no router, no dispatch)."""

    def __init__(self, block: torch.nn.Module, routing):
        super().__init__()
        self.products = _experts_only(block)
        self.routing = routing

    def forward(self, hidden_states, token_mask, input_ids, output_router_stats=False):
        return self.products(hidden_states).view_as(hidden_states), self.routing


def _no_routing_floor(model: torch.nn.Module, inputs: dict) -> torch.nn.Module:
    """A copy of the optimized MoE ``model`` whose every MoE block runs at its floor (``_NoRoutingFeedForward``):
    what the model would cost if routing and dispatch were free."""
    floor = copy.deepcopy(model)
    blocks = [layer for layer in floor.encoder.layer if hasattr(layer, "moe")]
    routings = []
    hooks = [layer.moe.register_forward_hook(lambda m, args, out: routings.append(out[1])) for layer in blocks]
    with torch.inference_mode():
        floor(**inputs)
    for hook in hooks:
        hook.remove()
    for layer, routing in zip(blocks, routings):
        layer.moe = _NoRoutingFeedForward(layer.moe, routing)
    return floor


def eager_cases(rounds: int, tiny: bool) -> None:
    models = _pair(tiny)
    for batch in (1, 32):
        inputs = latency_inputs(models[PAIR[0]].config.vocab_size, batch, 128)
        candidates = {}
        for name, model in models.items():
            fast = copy.deepcopy(model)
            optimize_for_inference(fast, tokens=inputs["input_ids"].numel(), measure=False)
            candidates[name] = lambda fast=fast, inputs=inputs: fast(**inputs)
            candidates[f"{name} plain"] = lambda model=model, inputs=inputs: model(**inputs)
            if name == PAIR[0]:
                floor = _no_routing_floor(fast, inputs)
                candidates["floor"] = lambda floor=floor, inputs=inputs: floor(**inputs)
        times = compare_latencies(candidates, rounds=max(3, rounds // (8 if batch > 1 else 1)), warmup=1)
        target = "<= 1.15x" if batch == 1 else "<= 1.05x"
        print(
            format_ratio(
                f"2. MiniMoE 3L;384H / MiniLM 3L;384H, eager (optimized), batch {batch} x 128",
                times[PAIR[0]],
                times[PAIR[1]],
                target,
            )
        )
        print(
            format_ratio(
                "   floor: the MoE model with routing and dispatch free / its dense twin",
                times["floor"],
                times[PAIR[1]],
                "report",
            )
        )
        print(
            format_ratio(
                "   the same, plain model files", times[f"{PAIR[0]} plain"], times[f"{PAIR[1]} plain"], "report"
            )
        )


def runtime_cases(rounds: int, tiny: bool, work_dir: Path) -> None:
    models = _pair(tiny)
    with_tflite = all(importlib.util.find_spec(m) for m in ("litert_torch", "ai_edge_litert"))
    inputs = latency_inputs(models[PAIR[0]].config.vocab_size, 1, 128)
    runners = {}
    for name, model in models.items():
        folder = work_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        onnx_path, int8_path = folder / "model.onnx", folder / "model_quantized.onnx"
        export_module_with_dynamo(
            model, ("last_hidden_state",), onnx_path, latency_inputs(model.config.vocab_size, 2, 16, seed=1)
        )
        quantize_onnx_file(onnx_path, int8_path)
        runners[(name, "onnx")] = onnxruntime_runner(onnx_path, inputs)
        runners[(name, "onnx-int8")] = onnxruntime_runner(int8_path, inputs)
        if with_tflite:
            from compact_bert.export.tflite_exporter import convert_to_tflite, set_eval_capacity_factor

            convert_to_tflite(model, ("last_hidden_state",), inputs, folder / "model.tflite")
            runners[(name, "tflite")] = tflite_runner(folder / "model.tflite", inputs)
            if name == PAIR[0]:
                limited = copy.deepcopy(model)
                set_eval_capacity_factor(limited, CAPACITY_FACTOR)
                convert_to_tflite(limited, ("last_hidden_state",), inputs, folder / "capacity.tflite")
                runners[(name, "tflite-capacity")] = tflite_runner(folder / "capacity.tflite", inputs)
        with torch.inference_mode():
            expected = model(**inputs).last_hidden_state.numpy()
        difference = np.abs(runners[(name, "onnx")]()[0] - expected).max()
        print(f"   {name}: max |ONNX Runtime fp32 - PyTorch| on the timed input {difference:.1e}")
    if not with_tflite:
        print("   LiteRT row skipped: the `tflite` extra (litert-torch, ai-edge-litert) is not installed here.")
    samples = measure_interleaved_samples(runners, rounds=rounds, warmup=2)
    times = {key: Seconds(values) for key, values in samples.items()}
    for runtime, target in (("onnx", "<= 1.25x"), ("onnx-int8", "<= 1.25x"), ("tflite", "<= 1.5x")):
        if (PAIR[0], runtime) in times:
            print(
                format_ratio(
                    f"3. MiniMoE 3L;384H / MiniLM 3L;384H, {runtime}, batch 1 x 128",
                    times[(PAIR[0], runtime)],
                    times[(PAIR[1], runtime)],
                    target,
                )
            )
    if (PAIR[0], "tflite-capacity") in times:
        print(
            format_ratio(
                f"   LiteRT, MiniMoE with eval_capacity_factor {CAPACITY_FACTOR} (capacity form) / MiniLM",
                times[(PAIR[0], "tflite-capacity")],
                times[(PAIR[1], "tflite")],
                "<= 1.5x",
            )
        )


def large_layer_case(rounds: int, tiny: bool) -> None:
    experts, hidden, ffn = (8, 48, 96) if tiny else (64, 768, 3072)
    layer = _layer(experts, hidden, ffn)
    optimized = _optimized(layer)
    tokens, mask = torch.randn(1, 128, hidden), torch.ones(1, 128, dtype=torch.bool)
    with torch.inference_mode():
        _, routing = layer(tokens, mask, None, output_router_stats=True)
    used = (routing.expert_load > 0).nonzero().flatten().tolist()
    times = compare_latencies(
        {"layer": lambda: optimized(tokens, mask, None), "floor": _read_weights(layer, used)}, rounds=rounds
    )
    share = times["floor"] / times["layer"]
    print(
        format_ratio(
            f"4. {experts} experts, d {hidden}, 128 tokens ({len(used)} used): weight-read floor / layer "
            f"= {share:.0%} of the floor's speed",
            times["floor"],
            times["layer"],
            ">= 0.85x",
        )
    )


def compiled_case(rounds: int, tiny: bool) -> None:
    model = _pair(tiny)[PAIR[0]]
    inputs = latency_inputs(model.config.vocab_size, 1, 128)
    eager = copy.deepcopy(model)
    optimize_for_inference(eager, tokens=inputs["input_ids"].numel(), measure=False)
    compiled = torch.compile(copy.deepcopy(model), dynamic=True, options={"freezing": True})
    with torch.inference_mode():
        compiled(**inputs)
    times = compare_latencies(
        {"compiled": lambda: compiled(**inputs), "eager": lambda: eager(**inputs)}, rounds=rounds
    )
    print(
        format_ratio(
            "5. MiniMoE 3L;384H compiled / eager (optimized), batch 1 x 128",
            times["compiled"],
            times["eager"],
            "<= 1.0x",
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Few rounds: a smoke run whose numbers mean little.")
    parser.add_argument("--tiny", action="store_true", help="Tiny models: a smoke run whose numbers mean nothing.")
    parser.add_argument("--no_compile", action="store_true", help="Skip row 5 (minutes of compilation).")
    arguments = parser.parse_args()
    rounds = 3 if arguments.quick else 60
    print(f"{device_description()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    layer_case(rounds, arguments.tiny)
    eager_cases(rounds, arguments.tiny)
    with tempfile.TemporaryDirectory() as scratch:
        runtime_cases(max(3, rounds // 2), arguments.tiny, Path(scratch))
    large_layer_case(rounds, arguments.tiny)
    if not arguments.no_compile:
        compiled_case(rounds, arguments.tiny)


if __name__ == "__main__":
    main()
