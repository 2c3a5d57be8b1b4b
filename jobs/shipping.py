"""The main job's last step: take the fine-tuned student all the way to what ships.

ONNX export (parity-checked against PyTorch) and dynamic int8 into ``<folder>/onnx/``, SST-2 dev accuracy of both
files through onnxruntime, latency of eager PyTorch / ONNX fp32 / ONNX int8 side by side (``latency.json``), the
model card re-written with them, then a summary table and the listing of what ``compact-bert push`` would upload.
Without onnxruntime (a plain install, no ``export`` extra) the step says so in one line and the job still ends.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import transformers

__all__ = ["print_shipping_summary", "ship_finetuned_student", "ship_when_possible", "summary_table"]

LATENCY_SEQUENCE_LENGTH = 128
LATENCY_ROUNDS = 20


def _export_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx", "onnxscript"))


def ship_finetuned_student(
    folder: str | Path, validation_file: str | Path, eval_limit: int | None, max_length: int
) -> dict:
    """Export, quantize, evaluate and time the fine-tuned classifier in ``folder``; the summary fields it adds."""
    from ..configuration.dense_students import max_sequence_length
    from ..evaluation.exported_accuracy import compare_exported_models
    from ..evaluation.latency_report import LatencyReport, RuntimeLatency, write_latency
    from ..evaluation.runtime_latency import (
        device_description,
        eager_runner,
        latency_inputs,
        measure_interleaved,
        onnxruntime_runner,
    )
    from ..export.onnx_exporter import export_onnx
    from ..export.onnx_quantization import quantize_onnx
    from ..model_cards import write_model_card

    folder = Path(folder)
    onnx_dir = folder / "onnx"
    export = export_onnx(folder, onnx_dir, "text-classification")
    quantized = quantize_onnx(onnx_dir, "text-classification")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    # "onnx": the fastest fp32 form (a BERT student's fused graph), which the int8 file is made from; the standard
    # model.onnx beside it is scored and timed too, as every other runtime would read it.
    files = {"onnx": quantized.float_path, "onnx-int8": quantized.quantized_path}
    if export.onnx_path != quantized.float_path:
        files["onnx-standard"] = export.onnx_path
    accuracy = compare_exported_models(files, tokenizer, validation_file, eval_limit, max_length)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder)
    inputs = latency_inputs(
        model.config.vocab_size, 1, min(LATENCY_SEQUENCE_LENGTH, max_sequence_length(model.config))
    )
    runners = {"eager": eager_runner(model, inputs, optimize=True)}
    runners.update({name: onnxruntime_runner(path, inputs) for name, path in files.items()})
    measured = measure_interleaved(runners, rounds=LATENCY_ROUNDS)
    runtimes = {"eager": measured["eager"]}
    for name, path in files.items():
        precision = "int8" if name == "onnx-int8" else "float32"
        runtimes[name] = RuntimeLatency(
            measured[name].median_ms, measured[name].p90_ms, path.relative_to(folder).as_posix(), precision
        )
    write_latency(folder, LatencyReport(inputs["input_ids"].shape[1], 1, device_description(), runtimes))
    write_model_card(folder)
    return {
        "onnx_fused_operators": export.fused_operators,
        "onnx_parity_max_abs_diff": export.max_abs_diff,
        "onnx_fp32_bytes": quantized.float_bytes,
        "onnx_int8_bytes": quantized.quantized_bytes,
        "onnx_sst2_accuracy": round(accuracy.accuracy["onnx"], 4),
        "onnx_int8_sst2_accuracy": round(accuracy.accuracy["onnx-int8"], 4),
        "onnx_int8_agreement": round(accuracy.agreement, 4),
        **(
            {"onnx_standard_sst2_accuracy": round(accuracy.accuracy["onnx-standard"], 4)}
            if "onnx-standard" in files
            else {}
        ),
        "latency_ms": {name: runtime.median_ms for name, runtime in runtimes.items()},
        "latency_batch_and_length": [1, int(inputs["input_ids"].shape[1])],
    }


def summary_table(summary: dict) -> str:
    """The main job's closing table: what was built, how good, how fast, which files."""
    mb = 1e6
    rows = [
        (
            "parameters (total / active per token)",
            f"{summary['student_total_params'] / 1e6:.1f}M / {summary['student_active_params_per_token'] / 1e6:.1f}M",
        ),
        (
            "SST-2 dev accuracy: PyTorch / ONNX fp32 / ONNX int8",
            f"{summary.get('sst2_eval_accuracy')} / {summary['onnx_sst2_accuracy']} / {summary['onnx_int8_sst2_accuracy']}"
            f" (int8 agrees with fp32 on {100 * summary['onnx_int8_agreement']:.1f}%)",
        ),
        (
            "latency, batch {} x {} (median ms): eager / ONNX / int8".format(*summary["latency_batch_and_length"]),
            " / ".join(f"{summary['latency_ms'][name]:.1f}" for name in ("eager", "onnx", "onnx-int8")),
        ),
        (
            "ONNX files: fp32 / int8",
            f"{summary['onnx_fp32_bytes'] / mb:.1f} MB / {summary['onnx_int8_bytes'] / mb:.1f} MB "
            f"(parity with PyTorch {summary['onnx_parity_max_abs_diff']:.1e})",
        ),
    ]
    if "comparison" in summary:
        folders = summary["comparison"]["folders"]
        rows += [
            ("teacher fine-tuned on the task", folders["teacher"]),
            ("layer-dropped baseline", folders["baseline"]),
            ("run summary", summary["output_dir"]),
        ]
    else:
        rows.append(("distilled student", summary["output_dir"]))
    rows.append(("student classifier (+ onnx/, latency.json, README.md card)", summary["finetune_output_dir"]))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def ship_when_possible(summary: dict) -> bool:
    """Run the shipping step on the main job's fine-tuned classifier and add its fields to ``summary``; without
    the ``export`` extra, say so in one line and return ``False``."""
    if not _export_available():
        print(
            'ONNX export skipped: onnxruntime, onnx and onnxscript are not installed (pip install "compact-bert[export]").'
        )
        return False
    summary.update(
        ship_finetuned_student(
            summary["finetune_output_dir"],
            summary["finetune_validation_file"],
            summary["finetune_max_eval_samples"],
            summary["finetune_max_seq_length"],
        )
    )
    return True


def print_shipping_summary(summary: dict) -> None:
    """The closing table, then what ``compact-bert push --dry-run`` lists for the fine-tuned folder."""
    from .push import print_upload_listing

    folder = Path(summary["finetune_output_dir"])
    print("\n" + summary_table(summary) + "\n")
    repo_id = f"your-namespace/{folder.name}"
    print(f"`compact-bert push {folder} {repo_id} --dry-run` (which also prints the card) lists:")
    print_upload_listing(folder, repo_id)
