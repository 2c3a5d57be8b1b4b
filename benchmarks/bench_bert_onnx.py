"""A dense student's shipped ONNX forms against what a transformers user gets without compact-bert.

The anchor is the path a user takes with the plain model: ``optimum-cli export onnx`` of a
``BertForSequenceClassification`` of the same shape (Optimum's own BERT export, with compact-bert's optimum-cli
plug-in kept out of the process), then ONNX Runtime's BERT optimizer (``model_type="bert"``) and dynamic int8 of the
optimized graph. Against it: the three files compact-bert ships for the same weights (``export onnx`` + int8):
``model.onnx`` (standard ONNX), ``model_optimized.onnx`` (the fused graph) and ``model_quantized.onnx``. All are
timed interleaved in one process (``evaluation/runtime_latency.py``: spinning off, an untimed call before each
timed one) at batch 1 x 128 and 32 x 128, and each graph's fused operators are counted. The done-when of the
shipping work: the fastest shipped fp32 form ≤ 1.05x the optimized anchor, and int8 likewise.

``--families`` also reports what ONNX Runtime's BERT optimizer fuses in the compact-bert family graphs (a
mixture-of-experts student, MobileBERT_TINY) as ``export onnx`` writes them.

Optimum's exporter needs transformers 4.57 (the ``onnx`` extra): run this where it is installed, or point
``--optimum_python`` (default: this interpreter when it has Optimum, else ``$COMPACT_BERT_OTHER_PYTHON``) at an
interpreter that has it.

Run: ``python benchmarks/bench_bert_onnx.py [--model DIR] [--rounds 20] [--families]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import torch
import transformers

from compact_bert.distillation.data import packaged_teacher_dir
from compact_bert.evaluation.runtime_latency import latency_inputs, measure_interleaved, onnxruntime_runner
from compact_bert.export.bert_onnx import OPTIMIZED_FILE, fused_operators, optimize_bert_graph
from compact_bert.export.onnx_exporter import export_onnx, optimum_available
from compact_bert.export.onnx_quantization import quantize_onnx, quantize_onnx_file

# optimum-cli as a user without compact-bert runs it: the plug-in module compact-bert installs into Optimum's
# namespace is replaced by an empty one before optimum-cli loads its plug-ins, and compact_bert cannot be imported.
OPTIMUM_CLI_WITHOUT_PLUGIN = textwrap.dedent(
    """
    import importlib.abc, sys, types

    class BlockCompactBert(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "compact_bert" or name.startswith("compact_bert."):
                raise ModuleNotFoundError(f"{name} is blocked: optimum-cli runs without compact-bert")

    sys.meta_path.insert(0, BlockCompactBert())
    sys.modules["optimum.commands.register.compact_bert_onnx"] = types.ModuleType("compact_bert_onnx")
    from optimum.commands.optimum_cli import main

    sys.argv = ["optimum-cli", *sys.argv[1:]]
    main()
    """
)


def optimum_python(requested: str | None) -> str:
    """The interpreter that runs optimum-cli (see the module docstring)."""
    if requested:
        return requested
    if optimum_available():
        return sys.executable
    other = os.environ.get("COMPACT_BERT_OTHER_PYTHON")
    if other:
        return other
    raise SystemExit(
        "optimum-cli needs optimum-onnx (transformers 4.57, the `onnx` extra): give --optimum_python or set "
        "COMPACT_BERT_OTHER_PYTHON to an interpreter that has it."
    )


def export_with_optimum_cli(python: str, model_dir: Path, output_dir: Path) -> Path:
    """``optimum-cli export onnx --model model_dir --task text-classification output_dir`` without compact-bert."""
    script = output_dir.parent / "optimum_cli_without_plugin.py"
    script.write_text(OPTIMUM_CLI_WITHOUT_PLUGIN)
    command = [python, str(script), "export", "onnx", "--model", str(model_dir), "--task", "text-classification"]
    result = subprocess.run(
        [*command, str(output_dir)], capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    if result.returncode != 0:
        raise SystemExit(f"optimum-cli failed:\n{result.stderr[-3000:]}")
    return output_dir / "model.onnx"


def student_folder(folder: Path, layers: int) -> Path:
    """The main job's student shape (the packaged teacher's first ``layers`` layers, a 2-label head) when no
    ``--model`` is given: latency does not depend on what the weights learned."""
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification.from_pretrained(
        packaged_teacher_dir(), num_hidden_layers=layers, num_labels=2
    )
    model.save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(packaged_teacher_dir()).save_pretrained(folder)
    return folder


def family_fusions(scratch: Path) -> dict[str, dict[str, int]]:
    """What ONNX Runtime's BERT optimizer fuses in compact-bert family graphs as ``export onnx`` writes them."""
    from onnxruntime.transformers.optimizer import optimize_model

    from compact_bert.configuration import preset_config

    small = {"num_hidden_layers": 2, "num_labels": 2}
    results = {}
    for preset in ("minimoe-3l-384h", "mobilebert-tiny"):
        torch.manual_seed(0)
        config = preset_config(preset, **small)
        folder = scratch / preset
        transformers.AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
        report = export_onnx(folder, folder / "onnx", "text-classification")
        heads = config.num_attention_heads
        width = getattr(config, "true_hidden_size", config.hidden_size)
        optimized = optimize_model(str(report.onnx_path), model_type="bert", num_heads=heads, hidden_size=width)
        fused = {name: count for name, count in optimized.get_fused_operator_statistics().items() if count}
        results[f"{preset} ({report.exporter} export, {config.num_hidden_layers} layers)"] = fused
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A BERT classifier folder (default: the main job's student shape).")
    parser.add_argument("--layers", type=int, default=3, help="Layers of the default student (default 3).")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--optimum_python", help="Interpreter with optimum-onnx (see the module docstring).")
    parser.add_argument("--families", action="store_true", help="Also report fusions in the family graphs.")
    args = parser.parse_args()
    python = optimum_python(args.optimum_python)
    with tempfile.TemporaryDirectory(prefix="bench-bert-onnx-") as scratch_name:
        scratch = Path(scratch_name)
        model_dir = Path(args.model) if args.model else student_folder(scratch / "student", args.layers)
        config = transformers.AutoConfig.from_pretrained(model_dir)
        shipped_dir = scratch / "shipped"
        shutil.copytree(model_dir, shipped_dir, ignore=shutil.ignore_patterns("onnx"))
        export_onnx(shipped_dir, shipped_dir / "onnx", "text-classification")
        quantize_onnx(shipped_dir / "onnx", "text-classification")
        anchor = export_with_optimum_cli(python, model_dir, scratch / "optimum")
        anchor_optimized = scratch / "optimum" / OPTIMIZED_FILE
        optimize_bert_graph(anchor, config, anchor_optimized)
        anchor_int8 = scratch / "optimum" / "model_optimized_quantized.onnx"
        quantize_onnx_file(anchor_optimized, anchor_int8, fused=True)
        files = {
            "anchor: optimum-cli + ORT optimizer (fp32)": anchor_optimized,
            "anchor: optimum-cli raw (fp32)": anchor,
            "anchor: int8 of the optimized graph": anchor_int8,
            "shipped: onnx/model.onnx (standard)": shipped_dir / "onnx" / "model.onnx",
            "shipped: onnx/model_optimized.onnx": shipped_dir / "onnx" / OPTIMIZED_FILE,
            "shipped: onnx/model_quantized.onnx (int8)": shipped_dir / "onnx" / "model_quantized.onnx",
        }
        results = {"fused_operators": {name: fused_operators(path) for name, path in files.items()}}
        for batch in args.batches:
            inputs = latency_inputs(config.vocab_size, batch, args.sequence_length)
            runners = {name: onnxruntime_runner(path, inputs) for name, path in files.items()}
            measured = measure_interleaved(runners, rounds=args.rounds)
            fp32_anchor = measured["anchor: optimum-cli + ORT optimizer (fp32)"].median_ms
            int8_anchor = measured["anchor: int8 of the optimized graph"].median_ms
            rows = {}
            for name, result in measured.items():
                reference = int8_anchor if "int8" in name else fp32_anchor
                rows[name] = {
                    "median_ms": round(result.median_ms, 2),
                    "p90_ms": round(result.p90_ms, 2),
                    "vs_anchor": round(result.median_ms / reference, 3),
                }
            results[f"batch {batch} x {args.sequence_length}"] = rows
            print(f"\nbatch {batch} x {args.sequence_length} ({args.rounds} interleaved rounds, median [p90] ms):")
            for name, row in rows.items():
                print(f"  {name:<45} {row['median_ms']:8.2f} [{row['p90_ms']:.2f}]  {row['vs_anchor']:.3f}x anchor")
        if args.families:
            results["family_fusions"] = family_fusions(scratch)
    print("\nfused operators per graph:")
    for name, counts in results["fused_operators"].items():
        print(f"  {name:<45} {counts}")
    if "family_fusions" in results:
        print("\nONNX Runtime's BERT optimizer on the compact-bert family graphs:")
        for name, counts in results["family_fusions"].items():
            print(f"  {name:<45} {counts}")
    print("\n" + json.dumps(results))


if __name__ == "__main__":
    main()
