"""What dynamic int8 costs fine-tuned SST-2 students: size and GLUE SST-2 dev accuracy, fp32 vs int8, through
onnxruntime and, with ``--tflite``, LiteRT (paper 001 §4.5 reports that int8 loses almost nothing for MobileBERT).

Each folder (a ``text-classification`` model, e.g. ``runs/mobilebert_small/student_pkt-sst2`` written by the
``mobilebert_small`` recipe or ``outputs/minimoe-student-sst2`` written by the main job) is exported with
``compact-bert export onnx`` (which checks fp32 parity with PyTorch), quantized with ``quantize_onnx``, and both
files are evaluated on the 872 dev sentences (the bundled copy of the GLUE dev set), truncated at 64 tokens.
``--tflite`` (the ``tflite`` extra) also converts each folder at batch 1 × 64 tokens with dynamic-range int8
(``compact-bert export tflite ... --quantize int8``) and evaluates both files the same way::

    python -m examples.int8_accuracy FOLDER [FOLDER ...] --output_dir runs/int8_accuracy [--tflite]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformers import AutoTokenizer

from compact_bert.evaluation.exported_accuracy import compare_exported_models
from compact_bert.export.onnx_exporter import export_onnx
from compact_bert.export.onnx_quantization import quantize_onnx
from compact_bert.finetuning.bundled_data import bundled_sst2_files

__all__ = ["TFLITE_SEQUENCE_LENGTH", "main", "measure_folder"]

# The length sentences are truncated at in every runtime (onnx_predictions' default), and the TFLite shape.
TFLITE_SEQUENCE_LENGTH = 64


def _row(
    model_dir: Path,
    runtime: str,
    files: dict,
    parity: float,
    float_bytes: int,
    int8_bytes: int,
    limit: int | None,
    tokenizer,
) -> dict:
    measured = compare_exported_models(files, tokenizer, bundled_sst2_files()["validation"], limit)
    return {
        "folder": str(model_dir),
        "runtime": runtime,
        "fp32_parity_max_abs_diff": parity,
        "fp32_mb": float_bytes / 1e6,
        "int8_mb": int8_bytes / 1e6,
        "size_ratio": int8_bytes / float_bytes,
        "fp32_accuracy": measured.accuracy["fp32"],
        "int8_accuracy": measured.accuracy["int8"],
        "change_points": 100 * (measured.accuracy["int8"] - measured.accuracy["fp32"]),
        "agreement": measured.agreement,
        "examples": measured.examples,
    }


def measure_folder(model_dir: Path, output_dir: Path, limit: int | None = None, tflite: bool = False) -> list[dict]:
    """Export, quantize and evaluate one folder; its rows of the results table (ONNX, then TFLite)."""
    export = export_onnx(model_dir, output_dir, "text-classification")
    quantized = quantize_onnx(output_dir, "text-classification")
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    runtime = "onnxruntime" + (" (Optimum's quantizer)" if quantized.quantizer == "optimum" else "")
    rows = [
        _row(
            model_dir,
            runtime,
            {"fp32": quantized.float_path, "int8": quantized.quantized_path},
            export.max_abs_diff,
            quantized.float_bytes,
            quantized.quantized_bytes,
            limit,
            tokenizer,
        )
    ]
    if tflite:
        from compact_bert.export.tflite_exporter import export_tflite

        converted = export_tflite(
            model_dir, output_dir / "tflite", "text-classification", TFLITE_SEQUENCE_LENGTH, quantize="int8"
        )
        rows.append(
            _row(
                model_dir,
                f"LiteRT (1 x {TFLITE_SEQUENCE_LENGTH})",
                {"fp32": converted.tflite_path, "int8": converted.int8_path},
                converted.max_abs_diff,
                converted.float_bytes,
                converted.int8_bytes,
                limit,
                tokenizer,
            )
        )
    return rows


def format_table(rows: list[dict]) -> str:
    lines = [
        "| folder | runtime | fp32 MB | int8 MB | ratio | SST-2 dev fp32 | int8 | change (points) | agreement |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['folder']} | {row['runtime']} | {row['fp32_mb']:.1f} | {row['int8_mb']:.1f} | {row['size_ratio']:.2f} | "
            f"{100 * row['fp32_accuracy']:.1f} | {100 * row['int8_accuracy']:.1f} | "
            f"{row['change_points']:+.1f} | {100 * row['agreement']:.1f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="Fine-tuned SST-2 classifier folders.")
    parser.add_argument("--output_dir", type=Path, default=Path("runs/int8_accuracy"))
    parser.add_argument("--limit", type=int, default=None, help="Evaluate only the first N dev sentences.")
    parser.add_argument("--tflite", action="store_true", help="Also convert to TFLite and measure LiteRT fp32 / int8.")
    args = parser.parse_args(argv)
    missing = [str(folder) for folder in args.folders if not (folder / "config.json").is_file()]
    if missing:
        parser.error(f"no config.json in {', '.join(missing)}: pass folders written by save_pretrained.")
    if args.tflite:
        from compact_bert.export.tflite_exporter import check_tflite_installed

        try:
            check_tflite_installed()
        except ValueError as error:
            parser.error(str(error))
    rows = [
        row
        for index, folder in enumerate(args.folders)
        for row in measure_folder(folder, args.output_dir / f"{index}-{folder.name}", args.limit, args.tflite)
    ]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    table = format_table(rows)
    (args.output_dir / "results.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
