"""``compact-bert export onnx DIR OUT --task TASK``: an ONNX folder that onnxruntime and ``ORTModelFor*`` load."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..export.tasks import EXPORT_TASKS

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="Export a saved model folder to ONNX (Optimum where installed, torch.onnx dynamo otherwise).",
        description="Writes model.onnx (inputs input_ids, attention_mask, token_type_ids; Optimum's output names; "
        "dynamic batch and sequence axes), config.json, the remote code and the tokenizer files into OUT, then "
        "checks onnxruntime against PyTorch on a differently routed input and prints the difference.",
    )
    parser.add_argument("format", choices=["onnx"], help="Export format.")
    parser.add_argument("model_dir", type=Path, help="Folder written by save_pretrained (config.json and weights).")
    parser.add_argument("output_dir", type=Path, help="Output folder (created).")
    parser.add_argument("--task", required=True, help=f"One of: {', '.join(EXPORT_TASKS)}.")
    parser.add_argument("--opset", type=int, default=None, help="ONNX opset (default: the exporter's).")
    parser.add_argument(
        "--sequence_length", type=int, default=16, help="Length of the export example (at most the model's positions)."
    )
    parser.add_argument(
        "--exporter",
        choices=["auto", "optimum", "dynamo"],
        default="auto",
        help="auto: Optimum where it is installed (transformers 4.57 + the onnx extra), torch.onnx dynamo otherwise.",
    )
    parser.add_argument(
        "--quantize",
        choices=["int8"],
        default=None,
        help="Also write model_quantized.onnx: dynamic int8 (Optimum's avx2 settings; ORTQuantizer where installed).",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..export.onnx_exporter import export_onnx
    from ..export.onnx_quantization import quantize_onnx

    try:
        report = export_onnx(
            args.model_dir, args.output_dir, args.task, args.opset, args.sequence_length, exporter=args.exporter
        )
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f"compact-bert export: {error}") from error
    summary = {"onnx": str(report.onnx_path), "exporter": report.exporter, "task": report.task,
               "max_abs_diff": report.max_abs_diff, "output_scale": report.output_scale}  # fmt: skip
    if args.quantize == "int8":
        quantized = quantize_onnx(args.output_dir, args.task)
        summary.update({"int8": str(quantized.quantized_path), "quantizer": quantized.quantizer,
                        "float_bytes": quantized.float_bytes, "int8_bytes": quantized.quantized_bytes,
                        "size_ratio": round(quantized.size_ratio, 4)})  # fmt: skip
    print(json.dumps(summary, indent=2))
    return 0
