"""What an ONNX export of each task looks like: which head serves it, and the graph's named inputs and outputs.

Task names are Optimum's (``optimum-cli export onnx --task``), so that a folder exported by
``compact-bert export onnx`` and one exported by Optimum have the same inputs, outputs and dynamic axes and
load with the same ``ORTModelFor*`` class. The checks here run before any model is built, so that a wrong
task, a folder without weights or a too-long sequence fails in a second with a message naming the problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..configuration.dense_students import BERT_LAYOUT_MODEL_TYPES
from ..training.text_files import read_json_object

__all__ = [
    "EXPORT_TASKS",
    "ExportTask",
    "OPTIMUM_TASKS",
    "GRAPH_INPUTS",
    "check_export_folder",
    "check_sequence_length",
    "resolve_task",
]

# Every graph takes these, each ``[batch, sequence]`` int64, in this order.
GRAPH_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class ExportTask:
    """One exportable task.

    Attributes:
        name: Optimum's task name.
        auto_class: the transformers Auto class whose registered compact-bert class is the head.
        outputs: output name → the names of its dynamic axes by position (all outputs are per token or per
            sequence, so axis 0 is always the batch).
        ort_model_class: the ``optimum.onnxruntime`` class that loads the exported folder (``None``: a graph
            Optimum has no class for, run with a plain ``onnxruntime.InferenceSession``).
    """

    name: str
    auto_class: str
    outputs: dict
    ort_model_class: str | None


_TOKEN_AXES = {0: "batch_size", 1: "sequence_length"}

EXPORT_TASKS = {
    task.name: task
    for task in (
        ExportTask(
            "feature-extraction", "AutoModel", {"last_hidden_state": _TOKEN_AXES}, "ORTModelForFeatureExtraction"
        ),
        ExportTask("fill-mask", "AutoModelForMaskedLM", {"logits": _TOKEN_AXES}, "ORTModelForMaskedLM"),
        ExportTask(
            "text-classification",
            "AutoModelForSequenceClassification",
            {"logits": {0: "batch_size"}},
            "ORTModelForSequenceClassification",
        ),
        ExportTask(
            "token-classification",
            "AutoModelForTokenClassification",
            {"logits": _TOKEN_AXES},
            "ORTModelForTokenClassification",
        ),
        ExportTask(
            "question-answering",
            "AutoModelForQuestionAnswering",
            {"start_logits": _TOKEN_AXES, "end_logits": _TOKEN_AXES},
            "ORTModelForQuestionAnswering",
        ),
        # A sentence-transformers folder's whole pipeline (encoder, pooling, projection, normalisation) in one graph
        # with one output, as fastembed-style ONNX Runtime pipelines want it; exported by torch.onnx (dynamo).
        ExportTask("sentence-embedding", "AutoModel", {"sentence_embedding": {0: "batch_size"}}, None),
    )
}
# Tasks Optimum's exporter and ``ORTModelFor*`` classes serve (the others are exported with torch.onnx only).
OPTIMUM_TASKS = tuple(name for name, task in EXPORT_TASKS.items() if task.ort_model_class is not None)

_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def resolve_task(task: str, model_type: str) -> ExportTask:
    """The ``ExportTask`` for ``task`` on a ``model_type`` folder, or a ``ValueError`` naming what is valid."""
    from ..modeling import AUTO_CLASSES_BY_CONFIG

    if task not in EXPORT_TASKS:
        raise ValueError(f"Unknown export task {task!r}; valid tasks: {', '.join(EXPORT_TASKS)}.")
    heads = {config_class.model_type: classes for config_class, classes in AUTO_CLASSES_BY_CONFIG.items()}
    if model_type in BERT_LAYOUT_MODEL_TYPES:  # transformers' own dense encoders: every encoder head exists
        heads[model_type] = tuple(task.auto_class for task in EXPORT_TASKS.values())
    if model_type not in heads:
        raise ValueError(
            f"model_type {model_type!r} is neither a compact-bert family nor an encoder laid out as BERT; valid: "
            f"{', '.join(sorted(heads))}, {', '.join(BERT_LAYOUT_MODEL_TYPES)}."
        )
    export_task = EXPORT_TASKS[task]
    if export_task.auto_class not in heads[model_type]:
        served = [name for name, candidate in EXPORT_TASKS.items() if candidate.auto_class in heads[model_type]]
        raise ValueError(
            f"model_type {model_type!r} has no head for task {task!r} ({export_task.auto_class}); "
            f"its heads serve: {', '.join(served)}."
        )
    return export_task


def check_export_folder(model_dir) -> dict:
    """The folder's ``config.json`` as a dict, after checking that the folder holds a config and weights."""
    model_dir = Path(model_dir)
    if not model_dir.exists():
        raise FileNotFoundError(f"Model folder {model_dir} does not exist.")
    if not model_dir.is_dir():
        raise NotADirectoryError(
            f"MODEL_DIR {model_dir} is a file, not a folder: pass the folder `save_pretrained` wrote."
        )
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{model_dir} has no config.json: pass a folder written by `save_pretrained`.")
    if not any((model_dir / name).is_file() for name in _WEIGHT_FILES):
        raise FileNotFoundError(
            f"{model_dir} has no weights (none of {', '.join(_WEIGHT_FILES)}): exporting random weights is never "
            "what is meant; save the trained model with `save_pretrained` first."
        )
    return read_json_object(config_path, "a model config")


def check_sequence_length(sequence_length: int, max_position_embeddings: int) -> None:
    """The example sequence length must fit the model's position embeddings (and leave room to vary)."""
    if not 2 <= sequence_length <= max_position_embeddings:
        raise ValueError(
            f"Example sequence length {sequence_length} is outside [2, max_position_embeddings="
            f"{max_position_embeddings}] of this model; pass a length the model's positions cover."
        )
