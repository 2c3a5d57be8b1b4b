"""Register compact-bert's ONNX configs with Optimum the moment Optimum's exporter loads, without importing it.

``optimum.exporters.onnx.main_export`` refuses a model type its ``TasksManager`` does not know, and importing
Optimum costs seconds, so ``import compact_bert`` does neither: if Optimum's ONNX model configs are already
loaded it registers now, otherwise a one-shot import hook registers right after
``optimum.exporters.onnx.model_configs`` is executed (every path to ``main_export`` and ``optimum-cli export
onnx`` imports it before looking a model type up). ``optimum-cli`` additionally imports the registration
through the file compact-bert installs in the ``optimum.commands.register`` namespace.
"""

from __future__ import annotations

from ..import_hooks import after_import

__all__ = ["register_when_optimum_is_imported"]

_OPTIMUM_MODEL_CONFIGS = "optimum.exporters.onnx.model_configs"


def _register() -> None:
    from .optimum_configs import register_library_inference, register_onnx_configs, register_ort_optimizer_support

    register_onnx_configs()
    register_library_inference()
    register_ort_optimizer_support()


def register_when_optimum_is_imported() -> None:
    """What ``import compact_bert`` runs: register now if Optimum's exporter is loaded, else as soon as it is."""
    after_import(_OPTIMUM_MODEL_CONFIGS, lambda module: _register())
