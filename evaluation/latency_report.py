"""The one place that defines ``latency.json``: the measured latency a model card reports.

A benchmark or export step that times a saved model writes this file into the model folder; the card reads it
and says "not measured" when it is absent. Format (JSON object)::

    {
      "format_version": 1,
      "sequence_length": 128,            # tokens per input sequence
      "batch_size": 1,                   # sequences per call
      "device": "2-core x86-64 CPU",     # free text: where it was measured
      "runtimes": {                      # one entry per runtime measured; eager, onnx, tflite, ...
        "eager": {"median_ms": 12.5, "p90_ms": 13.1},
        "onnx":  {"median_ms": 4.2, "p90_ms": 4.4, "file": "onnx/model.onnx", "precision": "int8"}
      }
    }

``median_ms`` is required per runtime; ``p90_ms``, ``file`` (the exported file timed, relative to the folder)
and ``precision`` (default ``float32``) are optional. ``write_latency`` writes it so that writers and the card
agree on the format by construction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..training.atomic_files import write_text_atomically
from ..training.text_files import read_json_object

__all__ = ["LATENCY_FILE", "LatencyReport", "RuntimeLatency", "read_latency", "write_latency"]

LATENCY_FILE = "latency.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class RuntimeLatency:
    median_ms: float
    p90_ms: float | None = None
    file: str | None = None
    precision: str = "float32"


@dataclass(frozen=True)
class LatencyReport:
    sequence_length: int
    batch_size: int
    device: str
    runtimes: dict[str, RuntimeLatency] = field(default_factory=dict)

    def to_json(self) -> dict:
        runtimes = {
            name: {key: value for key, value in vars(runtime).items() if value is not None}
            for name, runtime in self.runtimes.items()
        }
        return {
            "format_version": FORMAT_VERSION,
            "sequence_length": self.sequence_length,
            "batch_size": self.batch_size,
            "device": self.device,
            "runtimes": runtimes,
        }


def write_latency(folder: str | Path, report: LatencyReport) -> Path:
    path = Path(folder) / LATENCY_FILE
    write_text_atomically(path, json.dumps(report.to_json(), indent=2) + "\n")
    return path


def read_latency(folder: str | Path) -> LatencyReport | None:
    """The folder's latency report, or ``None`` when nothing was measured. A malformed file is an error that names
    the file and the field: a card must not silently drop a measurement."""
    path = Path(folder) / LATENCY_FILE
    if not path.is_file():
        return None
    data = read_json_object(path, "compact-bert's latency report")
    if data.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format_version must be {FORMAT_VERSION}, got {data.get('format_version')!r}.")
    for name, kind in (("sequence_length", int), ("batch_size", int), ("device", str), ("runtimes", dict)):
        if not isinstance(data.get(name), kind):
            raise ValueError(f"{path}: field {name!r} must be a {kind.__name__}, got {data.get(name)!r}.")
    runtimes = {}
    for runtime, entry in data["runtimes"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("median_ms"), (int, float)):
            raise ValueError(f"{path}: runtimes.{runtime}.median_ms must be a number of milliseconds, got {entry!r}.")
        unknown = set(entry) - {"median_ms", "p90_ms", "file", "precision"}
        if unknown:
            raise ValueError(
                f"{path}: runtimes.{runtime} has unknown fields {sorted(unknown)}; valid: median_ms, "
                "p90_ms, file, precision."
            )
        runtimes[runtime] = RuntimeLatency(**entry)
    return LatencyReport(data["sequence_length"], data["batch_size"], data["device"], runtimes)
