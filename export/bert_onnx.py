"""ONNX of transformers' own BERT-layout encoders (dense students ship as BERT): the graph BERT runtimes recognise.

ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer``, ``model_type="bert"``) rewrites a BERT
graph into its fused kernels — one ``Attention`` per layer, ``SkipLayerNormalization``, ``BiasGelu``,
``EmbedLayerNormalization`` — but only when the graph has the shape it matches. Measured on both transformers lines
(torch 2.13, onnxruntime 1.32): the TorchScript exporter (``dynamo=False``) of a model on *eager* attention with the
plain 2-D mask gives that shape, and the optimizer fuses every layer's attention, as it does for an
``optimum-cli export onnx`` of the same model; the dynamo exporter's graph (either attention) and the SDPA graph of
transformers 5 fuse no attention at all. transformers 5 writes its head reshape as ``[b, s, -1, head_dim]``, so the
optimizer must be told ``num_heads`` and ``hidden_size`` rather than read them off the graph, and its eager mask is
matched from onnxruntime 1.31 on.

Two files result, as Optimum names them: ``model.onnx``, standard ONNX (every runtime reads it), and
``model_optimized.onnx``, the fused graph (ONNX Runtime's ``com.microsoft`` operators: ONNX Runtime only), which
the int8 model is made from. ``benchmarks/bench_bert_onnx.py`` times both against the optimum-cli + optimizer anchor.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from pathlib import Path

import torch
from torch import nn

from ..configuration.dense_students import BERT_LAYOUT_MODEL_TYPES
from ..training.compat import use_eager_attention

__all__ = [
    "BERT_OPSET",
    "OPTIMIZED_FILE",
    "BertGraphFusionError",
    "export_bert_graph",
    "exports_as_bert",
    "fastest_onnx_file",
    "fused_operators",
    "optimize_bert_graph",
]

logger = logging.getLogger(__name__)

OPTIMIZED_FILE = "model_optimized.onnx"
# The opset the TorchScript exporter writes by default for these graphs (Optimum's BERT config uses 14 too).
BERT_OPSET = 14


class BertGraphFusionError(RuntimeError):
    """ONNX Runtime's optimizer did not fuse one attention per layer: the fused file would not be the fast one."""


def exports_as_bert(model_type: str | None) -> bool:
    """Whether a folder of ``model_type`` is transformers' own BERT-layout encoder, exported by this module."""
    return model_type in BERT_LAYOUT_MODEL_TYPES


@contextlib.contextmanager
def _without_tracer_noise():
    """The TorchScript exporter's notes that concern nothing here: its deprecation notice (the dynamo exporter,
    its successor, gives a graph no runtime fuses), and tracer warnings on transformers' mask code, whose
    data-dependent branches the parity check covers on other shapes and paddings."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.onnx")
        warnings.filterwarnings("ignore", message=r".*torch\.onnx\.export.*dynamo=False.*")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=r".*aten::index.*")
        yield


def export_bert_graph(
    model: nn.Module, outputs: dict, onnx_path: Path, example: dict, opset: int | None = None
) -> None:
    """``model`` (its graph inputs ``input_ids``, ``attention_mask``, ``token_type_ids``) to ``onnx_path`` with the
    TorchScript exporter on eager attention; ``outputs``: output name → its dynamic axes (``ExportTask.outputs``)."""
    from .onnx_exporter import NamedGraphOutputs
    from .tasks import GRAPH_INPUTS

    use_eager_attention(model)
    axes = {name: {0: "batch_size", 1: "sequence_length"} for name in GRAPH_INPUTS}
    axes.update({name: dict(output_axes) for name, output_axes in outputs.items()})
    with torch.no_grad(), _without_tracer_noise():
        torch.onnx.export(
            NamedGraphOutputs(model, tuple(outputs)).eval(),
            tuple(example[name] for name in GRAPH_INPUTS),
            str(onnx_path),
            dynamo=False,
            opset_version=opset or BERT_OPSET,
            input_names=list(GRAPH_INPUTS),
            output_names=list(outputs),
            dynamic_axes=axes,
            do_constant_folding=True,
        )


def fused_operators(onnx_path: Path) -> dict[str, int]:
    """How many of each ONNX Runtime fused operator a graph holds (``Attention``, ``SkipLayerNormalization``, ...)."""
    import onnx

    counts: dict[str, int] = {}
    for node in onnx.load(str(onnx_path), load_external_data=False).graph.node:
        if node.domain == "com.microsoft":
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def optimize_bert_graph(onnx_path: Path, config, target: Path | None = None) -> dict[str, int]:
    """ONNX Runtime's BERT optimizer on ``onnx_path``, written to ``target`` (default ``model_optimized.onnx``
    beside it); returns the fused operators. ``BertGraphFusionError`` (and nothing written) when fewer than one
    ``Attention`` per layer were fused: then the fused file would not be the fast form, and ``model.onnx`` is what
    ships (``fastest_onnx_file``)."""
    import onnxruntime
    from onnxruntime.transformers.optimizer import optimize_model

    target = target or onnx_path.with_name(OPTIMIZED_FILE)
    logging.getLogger("onnxruntime.transformers").setLevel(logging.WARNING)  # its per-fusion progress lines
    optimized = optimize_model(
        str(onnx_path),
        model_type="bert",
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
    )
    counts = {name: count for name, count in optimized.get_fused_operator_statistics().items() if count}
    if counts.get("Attention", 0) != config.num_hidden_layers:
        raise BertGraphFusionError(
            f"ONNX Runtime {onnxruntime.__version__}'s BERT optimizer fused {counts.get('Attention', 0)} Attention "
            f"for {config.num_hidden_layers} layers in {onnx_path} (fused: {counts}); transformers 5's eager "
            "attention is matched from onnxruntime 1.31 on (pip install 'onnxruntime>=1.31')."
        )
    optimized.save_model_to_file(str(target))
    return counts


def fastest_onnx_file(onnx_dir: str | Path) -> Path:
    """The file of an export folder that runs fastest in ONNX Runtime: the fused graph where one was written (a
    BERT-layout export), else ``model.onnx``."""
    onnx_dir = Path(onnx_dir)
    optimized = onnx_dir / OPTIMIZED_FILE
    return optimized if optimized.is_file() else onnx_dir / "model.onnx"
