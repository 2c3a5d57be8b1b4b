"""Where fused dense layers pay (``modeling/dense_implementations.py``), measured side by side in one run.

For the dense products of MobileBERT (128-wide bottlenecks, 512-wide FFNs) and MiniLM 384 at 128 and 1,024 rows
(batch 1 and 8 × 128 tokens), each case is timed through the ``"onednn"`` implementation (packed weights, epilogue fused, projections
joined, with every per-call check) and through the ``"eager"`` one (the plain modules), interleaved. A ratio below
1 means fusing pays here; the last column says whether ``"auto"`` fuses that call on this machine (its probe,
``modeling/implementation_probe.py``).

Run: ``python benchmarks/bench_fused_linear.py`` (``--quick``: few rounds, a smoke run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn
from transformers.activations import GELUActivation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies

from compact_bert.modeling.dense_implementations import ALL_DENSE_IMPLEMENTATIONS, DenseShape, probed_fusion

# (label, input width, output widths joined, activation, residual)
CASES = [
    ("MobileBERT FFN in (relu)", 128, (512,), "relu", False),
    ("MobileBERT FFN out (+ residual)", 512, (128,), None, True),
    ("MobileBERT query+key joined", 128, (128, 128), None, False),
    ("MobileBERT input bottlenecks joined", 512, (128, 128), None, False),
    ("MiniLM-384 query+key+value joined", 384, (384, 384, 384), None, False),
    ("MiniLM-384 FFN in (gelu)", 384, (1536,), "gelu", False),
    ("MiniLM-384 FFN out (+ residual)", 1536, (384,), None, True),
]
ACTIVATIONS = {"relu": nn.ReLU(), "gelu": GELUActivation()}  # the activations the models use


def _call(implementation: str, linears, activation, residual, inputs):
    dense = ALL_DENSE_IMPLEMENTATIONS[implementation]
    if len(linears) > 1:
        return lambda: dense.joined(linears, inputs)
    return lambda: dense.linear(linears[0], inputs, activation=activation, residual=residual)


def _epilogue(activation_name: str | None, has_residual: bool) -> str:
    return activation_name or ("residual" if has_residual else "none")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Few rounds: a smoke run whose numbers mean little.")
    rounds = 5 if parser.parse_args().quick else 200
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; fused vs plain modules, median us per call")
    for label, width, outputs, activation_name, has_residual in CASES:
        linears = tuple(nn.Linear(width, out).eval() for out in outputs)
        activation = ACTIVATIONS.get(activation_name)
        for rows in (128, 1024):
            inputs = torch.randn(rows, width)
            residual = torch.randn(rows, outputs[0]) if has_residual else None
            calls = {name: _call(name, linears, activation, residual, inputs) for name in ("onednn", "eager")}
            times = compare_latencies({"fused": calls["onednn"], "plain": calls["eager"]}, rounds=rounds, warmup=3)
            multiply_adds = rows * width * sum(outputs)
            shape = DenseShape(_epilogue(activation_name, has_residual), width, sum(outputs), len(outputs), rows)
            auto = "fuses" if probed_fusion(shape) else "plain"
            print(
                f"{label}, {rows} rows ({multiply_adds / 1e6:.1f}M multiply-adds): fused {times['fused'] * 1e6:.0f} "
                f"us, plain {times['plain'] * 1e6:.0f} us -> {times['fused'] / times['plain']:.2f}x; auto: {auto}"
            )


if __name__ == "__main__":
    main()
