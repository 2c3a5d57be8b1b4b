"""Optimum's ONNX export for every compact-bert family (transformers 4.57 with the ``onnx`` extra).

One ``OnnxConfig`` per family, registered with Optimum's ``TasksManager`` through its documented extension
point (``TasksManager.create_register("onnx")``) for every task the family has a head for, so that
``optimum-cli export onnx --model DIR --task TASK OUT`` and ``optimum.exporters.onnx.main_export`` need no
extra arguments. ``optimum-cli`` imports this module at start-up through the file compact-bert installs in
Optimum's ``optimum.commands.register`` namespace (``export/optimum_cli_register/``).

The configs' model patcher swaps the MoE expert modules for their ONNX export form while Optimum's exporter
traces: routed up to ``ROUTED_EXPERTS_MAX`` experts (each expert's tokens through its own constant matrices), static
above, so that MoE graphs keep every expert, cost what the routing sends and export in seconds (``moe_export_form``).

Two things have no public extension point, and are wrapped here, each in one function that fails loudly if
Optimum renames what it relies on: ``ORTOptimizer`` looks the model type up in two private tables
(``register_ort_optimizer_support``), and Optimum decides a model's library from the module of its class,
which for ours is ``compact_bert.*``, not ``transformers.*`` (``register_library_inference``).

Importing this module imports Optimum; import it only where the ``onnx`` extra is installed.
"""

from __future__ import annotations

import functools

from optimum.exporters.onnx.config import TextEncoderOnnxConfig
from optimum.exporters.onnx.model_patcher import ModelPatcher
from optimum.exporters.tasks import TasksManager
from optimum.utils import NormalizedTextConfig

from ..modeling import AUTO_CLASSES_BY_CONFIG
from .moe_export_form import export_expert_form
from .tasks import EXPORT_TASKS, GRAPH_INPUTS, OPTIMUM_TASKS

__all__ = [
    "CompactBertOnnxConfig",
    "ONNX_CONFIGS",
    "register_library_inference",
    "register_onnx_configs",
    "register_ort_optimizer_support",
    "supported_tasks",
]

# Export precision promised for fp32 graphs: Optimum's validation after export uses it too.
VALIDATION_ATOL = 1e-4


class BatchedExpertModelPatcher(ModelPatcher):
    """Optimum's patcher plus the MoE experts' ONNX export form for the duration of the export."""

    def __enter__(self):
        super().__enter__()
        self._expert_form = export_expert_form(self._model, routed=True)
        self._expert_form.__enter__()

    def __exit__(self, exc_type, exc_value, traceback):
        self._expert_form.__exit__(exc_type, exc_value, traceback)
        super().__exit__(exc_type, exc_value, traceback)


class CompactBertOnnxConfig(TextEncoderOnnxConfig):
    """BERT's inputs and Optimum's standard outputs per task (``logits``, ``last_hidden_state``, …)."""

    NORMALIZED_CONFIG_CLASS = NormalizedTextConfig
    ATOL_FOR_VALIDATION = VALIDATION_ATOL
    # Opset 14 is what Optimum's own BERT export uses (Trilu-free, LayerNormalization-free graphs).
    DEFAULT_ONNX_OPSET = 14
    _MODEL_PATCHER = BatchedExpertModelPatcher

    @property
    def inputs(self) -> dict[str, dict[int, str]]:
        return {name: {0: "batch_size", 1: "sequence_length"} for name in GRAPH_INPUTS}


def supported_tasks(config_class) -> list[str]:
    """The export tasks ``config_class``'s family has a head for."""
    heads = AUTO_CLASSES_BY_CONFIG[config_class]
    return [name for name, task in EXPORT_TASKS.items() if task.auto_class in heads and name in OPTIMUM_TASKS]


def _family_config(config_class) -> type:
    name = f"{config_class.__name__.removesuffix('Config')}OnnxConfig"
    return type(name, (CompactBertOnnxConfig,), {"__doc__": f"ONNX export config of ``{config_class.model_type}``."})


ONNX_CONFIGS = {config_class.model_type: _family_config(config_class) for config_class in AUTO_CLASSES_BY_CONFIG}


def register_onnx_configs() -> None:
    """Register every family's ``OnnxConfig`` with ``TasksManager`` (idempotent)."""
    register = TasksManager.create_register("onnx", overwrite_existing=True)
    for config_class in AUTO_CLASSES_BY_CONFIG:
        register(config_class.model_type, *supported_tasks(config_class))(ONNX_CONFIGS[config_class.model_type])


def register_ort_optimizer_support() -> None:
    """Let ``ORTOptimizer`` optimize our graphs as BERT graphs (same attention and FFN patterns).

    Both tables are private to Optimum; a rename there must fail here with the name, not deep inside
    ``ORTOptimizer.optimize``.
    """
    from optimum.onnxruntime.utils import ORTConfigManager
    from optimum.utils.normalized_config import NormalizedConfigManager

    for table_owner in (ORTConfigManager, NormalizedConfigManager):
        if not isinstance(getattr(table_owner, "_conf", None), dict):
            raise RuntimeError(f"{table_owner.__module__}.{table_owner.__name__}._conf is gone: update {__name__}.")
    for model_type in ONNX_CONFIGS:
        ORTConfigManager._conf[model_type] = "bert"
        NormalizedConfigManager._conf[model_type] = NormalizedTextConfig


_PACKAGE = __name__.split(".")[0]


def register_library_inference() -> None:
    """Make ``TasksManager`` infer the library ``transformers`` for compact-bert's model classes (idempotent).

    ``main_export`` loads a compact-bert folder with our registered Auto classes, whose module starts with
    ``compact_bert``; Optimum recognises a library only by the module prefix and stops with "The library name
    could not be automatically inferred". Our classes are transformers ``PreTrainedModel``s.
    """
    original = getattr(TasksManager, "_infer_library_from_model_or_model_class", None)
    if original is None:
        raise RuntimeError(f"TasksManager._infer_library_from_model_or_model_class is gone: update {__name__}.")
    if getattr(original, "_knows_compact_bert", False):
        return
    original_function = original.__func__

    @functools.wraps(original_function)
    def infer_library(cls, model=None, model_class=None):
        target = type(model) if model is not None else model_class
        if target is not None and target.__module__.split(".")[0] == _PACKAGE:
            return "transformers"
        return original_function(cls, model=model, model_class=model_class)

    infer_library._knows_compact_bert = True
    TasksManager._infer_library_from_model_or_model_class = classmethod(infer_library)
