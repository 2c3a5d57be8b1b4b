"""``compact-bert export onnx|tflite DIR OUT --task TASK``: an ONNX folder that onnxruntime and ``ORTModelFor*``
load, or a fixed-shape LiteRT (TFLite) model for devices (the ``tflite`` extra)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..export.tasks import EXPORT_TASKS
from ..training.argument_checks import check_output_dir_creatable
from ..training.output_folders import check_export_output
from ..training.run_errors import RunSettingsError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="Export a saved model folder to ONNX or TFLite.",
        description="onnx: writes model.onnx (inputs input_ids, attention_mask, token_type_ids; Optimum's output "
        "names; dynamic batch and sequence axes); a BERT-layout folder (a dense student) also gets "
        "model_optimized.onnx, ONNX Runtime's fused BERT graph. tflite: writes model.tflite through litert-torch at the fixed "
        "shape --batch_size x --sequence_length (int32 inputs of the same names). Both copy config.json, the remote "
        "code and the tokenizer files into OUT, then check the runtime against PyTorch on a differently routed "
        "input and print the difference.",
    )
    parser.add_argument("format", choices=["onnx", "tflite"], help="Export format.")
    parser.add_argument("model_dir", type=Path, help="Folder written by save_pretrained (config.json and weights).")
    parser.add_argument(
        "output_dir",
        type=Path,
        help="Output folder (created), e.g. DIR/onnx: empty or an earlier export, which is replaced; never DIR itself "
        "or another folder holding a model.",
    )
    parser.add_argument("--task", required=True, help=f"One of: {', '.join(EXPORT_TASKS)}.")
    parser.add_argument("--opset", type=int, default=None, help="onnx only: ONNX opset (default: the exporter's).")
    parser.add_argument(
        "--sequence_length",
        type=int,
        default=None,
        help="onnx: length of the export example (default 16; the graph accepts any length). tflite (required): the "
        "fixed length the model runs at. At most the model's positions.",
    )
    parser.add_argument("--batch_size", type=int, default=None, help="tflite only: the fixed batch size (default 1).")
    parser.add_argument(
        "--capacity_factor",
        type=float,
        default=None,
        help="tflite only, MoE FFN models: give each expert ceil(F x tokens / experts) slots and drop the tokens over "
        "them (Switch Transformers' capacity; the model's eval_capacity_factor, recorded in the exported config), "
        "so that the graph computes F x the FFN's work instead of every expert for every token. Parity is checked "
        "against the PyTorch model with the same factor. Default: no capacity, every token kept.",
    )
    parser.add_argument(
        "--exporter",
        choices=["auto", "optimum", "dynamo", "torchscript"],
        default=None,
        help="onnx only. auto (default): for a BERT-layout folder, torch.onnx's TorchScript exporter on eager "
        "attention and ONNX Runtime's BERT optimizer (the graph BERT runtimes fuse); otherwise Optimum where it is "
        "installed (transformers 4.57 + the onnx extra), torch.onnx dynamo elsewhere.",
    )
    parser.add_argument(
        "--quantize",
        choices=["int8"],
        default=None,
        help="Also write a dynamic int8 model: onnx, model_quantized.onnx (Optimum's avx2 settings; ORTQuantizer "
        "where installed); tflite, model_int8.tflite (ai-edge-quantizer's dynamic_wi8_afp32).",
    )
    parser.set_defaults(handler=run)


def _check_format_options(args: argparse.Namespace) -> None:
    """Options of the other format are refused rather than ignored."""
    if args.format == "onnx" and args.batch_size is not None:
        raise SystemExit("compact-bert export: --batch_size is for tflite (ONNX graphs take any batch size).")
    if args.format == "onnx" and args.capacity_factor is not None:
        raise SystemExit(
            "compact-bert export: --capacity_factor is for tflite (ONNX graphs run each expert on its own tokens)."
        )
    if args.format == "tflite":
        given = [flag for flag in ("opset", "exporter") if getattr(args, flag) is not None]
        if given:
            raise SystemExit(f"compact-bert export: --{given[0]} is for onnx only.")
        if args.sequence_length is None:
            raise SystemExit(
                "compact-bert export: tflite needs --sequence_length N: a TFLite model runs at the one "
                "shape it was converted with (e.g. --sequence_length 128)."
            )


def run(args: argparse.Namespace) -> int:
    _check_format_options(args)
    try:  # before loading and exporting the model
        check_export_output(args.output_dir, args.model_dir)
        check_output_dir_creatable(args.output_dir, "OUTPUT_DIR")
    except RunSettingsError as error:
        raise SystemExit(f"compact-bert export: {str(error).replace('--OUTPUT_DIR', 'OUTPUT_DIR')}") from None
    try:
        if args.format == "tflite":
            return _run_tflite(args)
        return _run_onnx(args)
    except (ValueError, OSError) as error:
        raise SystemExit(f"compact-bert export: {error}") from error


def _run_tflite(args: argparse.Namespace) -> int:
    from ..export.tflite_exporter import export_tflite

    report = export_tflite(
        args.model_dir,
        args.output_dir,
        args.task,
        args.sequence_length,
        1 if args.batch_size is None else args.batch_size,
        quantize=args.quantize,
        capacity_factor=args.capacity_factor,
    )
    summary = {
        "tflite": str(report.tflite_path),
        "task": report.task,
        "shape": [report.batch_size, report.sequence_length],
        "max_abs_diff": report.max_abs_diff,
        "output_scale": report.output_scale,
        "float_bytes": report.float_bytes,
        "seconds": report.seconds,
    }
    if report.int8_path is not None:
        summary.update(
            {
                "int8": str(report.int8_path),
                "int8_bytes": report.int8_bytes,
                "size_ratio": round(report.int8_bytes / report.float_bytes, 4),
                "int8_max_abs_diff": report.int8_max_abs_diff,
            }
        )
    print(json.dumps(summary, indent=2))
    return 0


def _run_onnx(args: argparse.Namespace) -> int:
    from ..export.bert_onnx import fastest_onnx_file
    from ..export.onnx_exporter import export_onnx
    from ..export.onnx_quantization import quantize_onnx

    report = export_onnx(
        args.model_dir,
        args.output_dir,
        args.task,
        args.opset,
        args.sequence_length or 16,
        exporter=args.exporter or "auto",
    )
    summary = {
        "onnx": str(report.onnx_path),
        "exporter": report.exporter,
        "task": report.task,
        "max_abs_diff": report.max_abs_diff,
        "output_scale": report.output_scale,
        **(
            {"fused": str(fastest_onnx_file(args.output_dir)), "fused_operators": report.fused_operators}
            if report.fused_operators
            else {}
        ),
    }
    if args.quantize == "int8":
        quantized = quantize_onnx(args.output_dir, args.task)
        summary.update(
            {
                "int8": str(quantized.quantized_path),
                "quantizer": quantized.quantizer,
                "float_bytes": quantized.float_bytes,
                "int8_bytes": quantized.quantized_bytes,
                "size_ratio": round(quantized.size_ratio, 4),
            }
        )
    print(json.dumps(summary, indent=2))
    return 0
