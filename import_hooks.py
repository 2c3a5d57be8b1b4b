"""Run a callback right after a module of an optional library is first executed, without importing it.

compact-bert registers its model types in tables of optional libraries (PEFT's default targets, Optimum's ONNX
configs). Importing those libraries costs seconds, so ``import compact_bert`` does not: ``after_import`` calls
the callback at once when the module is already loaded, and otherwise installs a one-shot finder at the front
of ``sys.meta_path`` that wraps the module's real loader, so the callback runs the moment the module has been
executed (however the library gets imported).
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType

__all__ = ["after_import"]


class _RunAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of ``module_name`` so that ``callback`` runs after it."""

    def __init__(self, module_name: str, callback: Callable[[ModuleType], None]):
        self.module_name = module_name
        self.callback = callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module_name:
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
        callback = self.callback

        def exec_and_run(module: ModuleType) -> None:
            exec_module(module)
            callback(module)

        loader.exec_module = exec_and_run
        return spec


def after_import(module_name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` now if ``module_name`` is loaded, else once, right after it is first executed.
    Calling it again for the same module before that import adds no second hook."""
    module = sys.modules.get(module_name)
    if module is not None:
        callback(module)
    elif not any(
        isinstance(finder, _RunAfterImport) and finder.module_name == module_name for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _RunAfterImport(module_name, callback))
