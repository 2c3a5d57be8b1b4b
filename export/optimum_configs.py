"""Optimum's ONNX export for every compact-bert family (transformers 4.57 with the ``onnx`` extra).

One ``OnnxConfig`` per family, registered with Optimum's ``TasksManager`` through its documented extension
point (``TasksManager.create_register("onnx")``) for every task the family has a head for, so that
``optimum-cli export onnx --model DIR --task TASK OUT`` and ``optimum.exporters.onnx.main_export`` need no
extra arguments. ``optimum-cli`` imports this module at start-up through the file compact-bert installs in
Optimum's ``optimum.commands.register`` namespace (``export/optimum_cli_register/``).

The configs' model patcher switches the MoE expert modules to the batched export form while Optimum's
exporter traces, so that MoE graphs keep every expert and export in seconds (``moe_export_form``).

``ORTOptimizer`` has no public extension point: it looks the model type up in two private tables. They are
filled in one place, ``register_ort_optimizer_support``, which fails loudly if Optimum renames them.

Importing this module imports Optimum; import it only where the ``onnx`` extra is installed.
"""

from __future__ import annotations

from optimum.exporters.onnx.config import TextEncoderOnnxConfig
from optimum.exporters.onnx.model_patcher import ModelPatcher
from optimum.exporters.tasks import TasksManager
from optimum.utils import NormalizedTextConfig

from ..modeling import AUTO_CLASSES_BY_CONFIG
from .moe_export_form import batched_expert_form
from .tasks import EXPORT_TASKS, GRAPH_INPUTS

__all__ = [
    "CompactBertOnnxConfig",
    "ONNX_CONFIGS",
    "register_onnx_configs",
    "register_ort_optimizer_support",
    "supported_tasks",
]

# Export precision promised for fp32 graphs: Optimum's validation after export uses it too.
VALIDATION_ATOL = 1e-4


class BatchedExpertModelPatcher(ModelPatcher):
    """Optimum's patcher plus the batched MoE expert form for the duration of the export."""

    def __enter__(self):
        super().__enter__()
        self._expert_form = batched_expert_form(self._model)
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
    return [name for name, task in EXPORT_TASKS.items() if task.auto_class in heads]


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
