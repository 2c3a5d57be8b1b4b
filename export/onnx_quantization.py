"""Dynamic int8 quantization of an exported ONNX model (paper 001 §4.5: post-training int8 loses almost nothing).

``quantize_onnx`` writes ``model_quantized.onnx`` next to ``model.onnx`` — Optimum's file name, so that
``ORTModelFor*.from_pretrained(folder, file_name="model_quantized.onnx")`` loads it. A BERT-layout export is
quantized from its fused graph (``model_optimized.onnx``, ``bert_onnx``): the fused ``Attention`` and embedding
operators become ONNX Runtime's int8 ``QAttention`` / ``QEmbedLayerNormalization``. Otherwise, where optimum-onnx is
installed (transformers 4.57 with the ``onnx`` extra) Optimum's ``ORTQuantizer`` does it with
``AutoQuantizationConfig.avx2(is_static=False)``; elsewhere (transformers 5) onnxruntime's ``quantize_dynamic``
does it with the same settings, so that both lines produce the same kind of model:

- weights uint8, symmetric, per channel; activations uint8, asymmetric, quantized at run time (``IntegerOps``,
  QOperator format); no range reduction (``reduce_range=False``);
- onnxruntime's pre-processing (constant folding) first, so that every weight feeding a ``MatMul`` is a constant;
- operators ``MatMul``, ``Gather`` (the embeddings, and the expert matrices that the static MoE form gathers),
  ``Conv``, ``Attention``, ``LSTM``, ``Transpose``, ``EmbedLayerNormalization``: Optimum's avx2 list.
  ``ORTQuantizer.from_pretrained(folder)`` cannot read a custom ``config.json``; building it from an ``ORTModel``
  works (``optimum_configs`` registers our model types).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from .bert_onnx import OPTIMIZED_FILE, fastest_onnx_file
from .tasks import EXPORT_TASKS

__all__ = ["QUANTIZED_FILE", "QuantizationReport", "quantize_onnx", "quantize_onnx_file"]

QUANTIZED_FILE = "model_quantized.onnx"
# Optimum's AutoQuantizationConfig.avx2(is_static=False), spelled out for onnxruntime's own quantizer.
AVX2_OPERATORS = ("Conv", "MatMul", "Attention", "LSTM", "Gather", "Transpose", "EmbedLayerNormalization")
AVX2_EXTRA_OPTIONS = {
    "WeightSymmetric": True,
    "ActivationSymmetric": False,
    "EnableSubgraph": False,
    "ForceSymmetric": False,
}


@dataclass(frozen=True)
class QuantizationReport:
    """The files written and their sizes: the int8 model is what ships to a device."""

    float_path: Path
    quantized_path: Path
    quantizer: str
    float_bytes: int
    quantized_bytes: int

    @property
    def size_ratio(self) -> float:
        return self.quantized_bytes / self.float_bytes


def quantize_onnx(onnx_dir, task: str, quantizer: str = "auto") -> QuantizationReport:
    """Quantize ``onnx_dir/model.onnx`` (written by ``compact-bert export onnx`` for ``task``) to dynamic int8.

    ``quantizer``: ``"optimum"``, ``"onnxruntime"``, or ``"auto"`` (Optimum where it is installed)."""
    from .onnx_exporter import optimum_available

    onnx_dir = Path(onnx_dir)
    source = fastest_onnx_file(onnx_dir)
    if not source.is_file():
        raise FileNotFoundError(f"{source} does not exist: quantize a folder written by `compact-bert export onnx`.")
    if quantizer not in ("auto", "optimum", "onnxruntime"):
        raise ValueError(f"quantizer must be 'auto', 'optimum' or 'onnxruntime', got {quantizer!r}.")
    if quantizer == "optimum" and not optimum_available():
        raise ValueError("quantizer='optimum' needs optimum-onnx (the `onnx` extra, transformers < 4.58).")
    target = onnx_dir / QUANTIZED_FILE
    if quantizer == "optimum" and EXPORT_TASKS[task].ort_model_class is None:
        raise ValueError(f"quantizer='optimum' cannot read a {task!r} graph (no ORTModel class): use 'onnxruntime'.")
    # Optimum's ORTModel classes cannot load a pooled sentence-embedding graph: onnxruntime's quantizer does it.
    fused = source.name == OPTIMIZED_FILE
    if quantizer == "optimum" and fused:
        raise ValueError(
            f"quantizer='optimum' reads model.onnx, but {onnx_dir} ships a fused {OPTIMIZED_FILE}: use 'auto'."
        )
    use_optimum = quantizer == "optimum" or (
        quantizer == "auto" and not fused and optimum_available() and EXPORT_TASKS[task].ort_model_class is not None
    )
    if use_optimum:
        _quantize_with_optimum(onnx_dir, task)
    else:
        quantize_onnx_file(source, target, fused=fused)
    return QuantizationReport(
        source, target, "optimum" if use_optimum else "onnxruntime", _onnx_bytes(source), _onnx_bytes(target)
    )


def _quantize_with_optimum(onnx_dir: Path, task: str) -> None:
    import optimum.onnxruntime as optimum_onnxruntime
    from optimum.onnxruntime import ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    from . import optimum_configs  # noqa: F401  (registers our model types with Optimum)

    ort_model = getattr(optimum_onnxruntime, EXPORT_TASKS[task].ort_model_class).from_pretrained(onnx_dir)
    ORTQuantizer.from_pretrained(ort_model).quantize(
        save_dir=onnx_dir, quantization_config=AutoQuantizationConfig.avx2(is_static=False)
    )


def quantize_onnx_file(source: Path, target: Path, fused: bool = False) -> None:
    """Dynamic int8 of one ONNX file with onnxruntime's quantizer and Optimum's avx2 settings (module docstring);
    the benchmarks use it for every model they compare.

    onnxruntime's pre-processing runs first: the dynamo exporter keeps weights as graph inputs of ``Reshape`` /
    ``Transpose`` nodes (the MoE form's ``[E * out, in]`` view of the experts), and a ``MatMul`` is only quantized
    when its weight is a constant; the pre-processing folds them (main job's student: int8 size 0.57 → 0.25 of
    fp32). A ``fused`` graph (ONNX Runtime's optimizer output, weights already constant) is quantized as it is:
    ONNX's shape inference cannot type its ``com.microsoft`` operators, whose outputs are float
    (``DefaultTensorType``)."""
    import tempfile

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    options = dict(AVX2_EXTRA_OPTIONS)
    with tempfile.TemporaryDirectory() as scratch, _without_integer_tensor_notes():
        prepared = source
        if fused:
            options["DefaultTensorType"] = onnx.TensorProto.FLOAT
        else:
            prepared = Path(scratch) / "folded.onnx"
            quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        # written beside the target and moved over it once complete: no half-written int8 file is ever used
        partial = Path(target).with_name(f".{Path(target).name}.partial")
        quantize_dynamic(
            prepared,
            partial,
            op_types_to_quantize=list(AVX2_OPERATORS),
            per_channel=True,
            reduce_range=False,
            weight_type=QuantType.QUInt8,
            extra_options=options,
        )
        os.replace(partial, target)


class _DropIntegerTensorNotes(logging.Filter):
    """onnxruntime's quantizer logs a 20-line warning for each integer tensor it meets ("Inference failed or
    unsupported type to quantize for tensor ... elem_type: 7"): the routed MoE form's token positions, which are
    not meant to be quantized. Every other message passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        # ... and advice to pre-process a graph that is quantized as it is on purpose (a fused graph, whose
        # com.microsoft operators the pre-processing's shape inference cannot type).
        return (
            "unsupported type to quantize for tensor" not in message
            and "consider to run pre-processing" not in message
        )


@contextlib.contextmanager
def _without_integer_tensor_notes():
    note_filter = _DropIntegerTensorNotes()
    logger = logging.getLogger()  # onnxruntime's quantizer logs through the root logger
    logger.addFilter(note_filter)
    try:
        yield
    finally:
        logger.removeFilter(note_filter)


def _onnx_bytes(path: Path) -> int:
    """The model file plus any external-data files next to it (models over 2 GB keep weights outside)."""
    data = path.with_name(path.name + "_data")
    return path.stat().st_size + (data.stat().st_size if data.is_file() else 0)
