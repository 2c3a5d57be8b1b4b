"""Register compact-bert's ONNX configs with Optimum the moment Optimum's exporter loads, without importing it.

``optimum.exporters.onnx.main_export`` refuses a model type its ``TasksManager`` does not know, and importing
Optimum costs seconds, so ``import compact_bert`` does neither: if Optimum's ONNX model configs are already
loaded it registers now, otherwise a one-shot import hook registers right after
``optimum.exporters.onnx.model_configs`` is executed (every path to ``main_export`` and ``optimum-cli export
onnx`` imports it before looking a model type up). ``optimum-cli`` additionally imports the registration
through the file compact-bert installs in the ``optimum.commands.register`` namespace.
"""

from __future__ import annotations

import importlib.abc
import sys
from types import ModuleType

__all__ = ["register_when_optimum_is_imported"]

_OPTIMUM_MODEL_CONFIGS = "optimum.exporters.onnx.model_configs"


def _register() -> None:
    from .optimum_configs import register_library_inference, register_onnx_configs, register_ort_optimizer_support

    register_onnx_configs()
    register_library_inference()
    register_ort_optimizer_support()


class _RegisterWhenOptimumLoads(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of Optimum's model configs to register after it runs."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _OPTIMUM_MODEL_CONFIGS:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_and_register(module: ModuleType) -> None:
            exec_module(module)
            _register()

        loader.exec_module = exec_and_register
        return spec


def register_when_optimum_is_imported() -> None:
    """What ``import compact_bert`` runs: register now if Optimum's exporter is loaded, else as soon as it is."""
    if _OPTIMUM_MODEL_CONFIGS in sys.modules:
        _register()
    elif not any(isinstance(finder, _RegisterWhenOptimumLoads) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterWhenOptimumLoads())
