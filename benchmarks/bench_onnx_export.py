"""Seconds to export each preset to ONNX (target: at most 60 s per preset on the project machine).

Each preset is built at full size with random weights (export time does not depend on their values), saved,
and exported for ``text-classification`` by ``export_onnx`` with the exporter of this environment (Optimum's
on transformers 4.57 with the ``onnx`` extra, torch.onnx dynamo otherwise). Reported per preset: wall seconds and
this process's CPU seconds of the export call alone (the machine may be shared), then of the parity check that
``export_onnx`` runs after it. Presets whose fp32 weights exceed ``--max_gb`` are listed as skipped.

Run: ``python benchmarks/bench_onnx_export.py [--presets moe-bert-small minimoe-6l-384h] [--exporter dynamo]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
import transformers

from compact_bert.configuration import PRESETS, preset_config
from compact_bert.export import onnx_exporter


def _timed(function, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="*", default=sorted(PRESETS))
    parser.add_argument("--exporter", choices=["auto", "optimum", "dynamo"], default="auto")
    parser.add_argument("--max_gb", type=float, default=4.0, help="Skip presets whose fp32 weights exceed this.")
    args = parser.parse_args()
    rows = []
    for name in args.presets:
        torch.manual_seed(0)
        config = preset_config(name, num_labels=2)
        model = transformers.AutoModelForSequenceClassification.from_config(config).eval()
        gigabytes = sum(parameter.numel() for parameter in model.parameters()) * 4 / 1e9
        if gigabytes > args.max_gb:
            rows.append({"preset": name, "skipped": f"{gigabytes:.1f} GB of fp32 weights > --max_gb {args.max_gb}"})
            print(json.dumps(rows[-1]), flush=True)
            continue
        with tempfile.TemporaryDirectory() as folder:
            model.save_pretrained(Path(folder) / "model")
            del model
            timings = {}
            original_check = onnx_exporter.check_parity

            def timed_check(*check_args):
                result, timings["check_wall_s"], timings["check_cpu_s"] = _timed(original_check, *check_args)  # noqa: B023
                return result

            onnx_exporter.check_parity = timed_check
            try:
                report, wall, cpu = _timed(
                    onnx_exporter.export_onnx,
                    Path(folder) / "model",
                    Path(folder) / "onnx",
                    "text-classification",
                    exporter=args.exporter,
                )
            finally:
                onnx_exporter.check_parity = original_check
        rows.append(
            {
                "preset": name,
                "exporter": report.exporter,
                "export_wall_s": round(wall - timings["check_wall_s"], 1),
                "export_cpu_s": round(cpu - timings["check_cpu_s"], 1),
                "check_wall_s": round(timings["check_wall_s"], 1),
                "max_abs_diff": report.max_abs_diff,
            }
        )
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
