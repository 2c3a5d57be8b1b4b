"""ONNX Runtime's ``com.microsoft.MoE`` operator on the CPU, against the FFN it would replace.

Two questions decide whether compact-bert's ONNX graphs should use it:

1. Its activation: a 16-token, 4-expert probe (unit-scale inputs) run through ``MoE`` with ``activation_type="gelu"``,
   compared with the same experts in PyTorch under exact GELU and under the tanh approximation. compact-bert's
   experts use exact GELU; an export must match PyTorch within 1e-4.
2. Its speed: one 4-expert layer (d 384, FFN 1,536, top-1, 128 tokens) as a single ``MoE`` node against one dense FFN
   of the same width (``MatMul`` - ``Gelu`` - ``MatMul``), both in ONNX Runtime, interleaved in one session each.

Run: ``python benchmarks/bench_ort_moe_operator.py`` (seconds; ``--rounds N``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnx
import onnxruntime
import torch
from onnx import TensorProto, helper, numpy_helper
from torch.nn import functional as F

OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def _moe_model(tokens: int, hidden: int, experts: int, weights: dict) -> onnx.ModelProto:
    node = helper.make_node(
        "MoE",
        ["x", "router", "w1", "b1", "w2", "b2"],
        ["y"],
        domain="com.microsoft",
        activation_type="gelu",
        k=1,
        normalize_routing_weights=0,
    )
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, hidden]),
        helper.make_tensor_value_info("router", TensorProto.FLOAT, [tokens, experts]),
    ]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, hidden])
    initializers = [numpy_helper.from_array(array, name) for name, array in weights.items()]
    return helper.make_model(helper.make_graph([node], "moe", inputs, [output], initializers), opset_imports=OPSETS)


def _dense_model(tokens: int, hidden: int, weights: dict) -> onnx.ModelProto:
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["h1"]),
        helper.make_node("Gelu", ["h1"], ["h2"], domain="com.microsoft"),
        helper.make_node("MatMul", ["h2", "w2"], ["o"]),
        helper.make_node("Add", ["o", "b2"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, hidden])]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, hidden])
    initializers = [numpy_helper.from_array(array, name) for name, array in weights.items()]
    return helper.make_model(helper.make_graph(nodes, "ffn", inputs, [output], initializers), opset_imports=OPSETS)


def _session(model: onnx.ModelProto) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = torch.get_num_threads()
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _experts(generator: np.random.Generator, experts: int, hidden: int, inner: int, scale: float) -> dict:
    return {
        "w1": (generator.standard_normal((experts, inner, hidden)) * scale).astype(np.float32),  # [E, out, in]
        "b1": (generator.standard_normal((experts, inner)) * scale).astype(np.float32),
        "w2": (generator.standard_normal((experts, hidden, inner)) * scale).astype(np.float32),
        "b2": (generator.standard_normal((experts, hidden)) * scale).astype(np.float32),
    }


def activation_check() -> None:
    tokens, hidden, inner, experts = 16, 8, 32, 4
    generator = np.random.default_rng(0)
    weights = _experts(generator, experts, hidden, inner, 0.3)
    x = generator.standard_normal((tokens, hidden)).astype(np.float32)
    logits = generator.standard_normal((tokens, experts)).astype(np.float32)
    produced = _session(_moe_model(tokens, hidden, experts, weights)).run(None, {"x": x, "router": logits})[0]
    probabilities = torch.softmax(torch.from_numpy(logits), -1)
    weight, chosen = probabilities.max(-1)
    w = {name: torch.from_numpy(array) for name, array in weights.items()}
    for name, approximate in (("exact GELU", "none"), ("tanh GELU", "tanh")):
        rows = []
        for token in range(tokens):
            expert = int(chosen[token])
            inner_values = F.gelu(
                torch.from_numpy(x[token]) @ w["w1"][expert].T + w["b1"][expert], approximate=approximate
            )
            rows.append((inner_values @ w["w2"][expert].T + w["b2"][expert]) * weight[token])
        difference = float(np.abs(produced - torch.stack(rows).numpy()).max())
        print(f"MoE operator vs PyTorch experts with {name}: max |difference| {difference:.2e}")


def speed_check(rounds: int) -> None:
    tokens, hidden, inner, experts = 128, 384, 1536, 4
    generator = np.random.default_rng(1)
    weights = _experts(generator, experts, hidden, inner, 0.02)
    x = generator.standard_normal((tokens, hidden)).astype(np.float32)
    logits = generator.standard_normal((tokens, experts)).astype(np.float32)
    dense_weights = {
        "w1": weights["w1"][0].T.copy(),
        "b1": weights["b1"][0],
        "w2": weights["w2"][0].T.copy(),
        "b2": weights["b2"][0],
    }
    runners = {
        "MoE operator": (_session(_moe_model(tokens, hidden, experts, weights)), {"x": x, "router": logits}),
        "dense FFN": (_session(_dense_model(tokens, hidden, dense_weights)), {"x": x}),
    }
    samples = {name: [] for name in runners}
    for _ in range(rounds):
        for name, (session, feeds) in runners.items():
            session.run(None, feeds)
            start = time.perf_counter()
            session.run(None, feeds)
            samples[name].append((time.perf_counter() - start) * 1e3)
    medians = {name: float(np.median(values)) for name, values in samples.items()}
    for name, values in samples.items():
        print(f"{name}: median {medians[name]:.2f} ms [min {min(values):.2f}, p90 {np.percentile(values, 90):.2f}]")
    print(f"MoE operator / dense FFN: {medians['MoE operator'] / medians['dense FFN']:.2f}x (4 experts, 128 tokens)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    arguments = parser.parse_args()
    print(f"onnxruntime {onnxruntime.__version__}, {torch.get_num_threads()} threads")
    activation_check()
    speed_check(arguments.rounds)


if __name__ == "__main__":
    main()
