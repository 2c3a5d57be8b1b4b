"""Export of compact-bert models to ONNX and TFLite.

``onnx_exporter.export_onnx`` (the ``compact-bert export onnx`` command) works on both transformers lines;
``optimum_configs`` plugs every family into Optimum's exporter and ``ORTOptimizer`` where the ``onnx`` extra is
installed; ``tflite_exporter.export_tflite`` (``compact-bert export tflite``, the ``tflite`` extra) converts through
litert-torch at a fixed shape; ``moe_export_form`` selects the static MoE expert form both use. Optimum,
onnxruntime and the LiteRT packages are imported only by the functions that need them.
"""

from __future__ import annotations

from .onnx_exporter import ExportReport, export_onnx
from .tasks import EXPORT_TASKS, resolve_task

__all__ = ["EXPORT_TASKS", "ExportReport", "export_onnx", "resolve_task"]
