"""``compact-bert export tflite``: a LiteRT (TFLite) model of a saved folder, for phones and other small devices.

Optimum 2.x has no PyTorch → TFLite exporter; litert-torch (the ``tflite`` extra) is the maintained path. It
lowers a ``torch.export`` program, so the graph has one **fixed** shape (batch × sequence length, chosen at
export; LiteRT models are run at the shape they were converted with, inputs padded to it). Inputs are
``input_ids``, ``attention_mask``, ``token_type_ids`` as int32 (LiteRT's integer type; litert-torch narrows
int64 without ``enable_x64``), outputs carry the task's names (``logits``, ``start_logits`` ...), as in the ONNX
export.

**MoE models.** Eager dispatch gathers each expert's tokens with data-dependent shapes, which litert-torch rejects.
The export swaps in the static expert modules of ``moe_export_form`` instead (ONNX graphs, whose runtime takes
data-dependent shapes, use its routed form up to ``ROUTED_EXPERTS_MAX`` experts):
- up to ``ALL_EXPERTS_MAX`` experts, every token goes through every expert (one 2-D matmul over the experts'
  stacked ``[E * out, in]`` matrices) and keeps its own expert's row: E × the FFN's multiply-adds per token;
- above it, each token gathers its own expert's matrices and runs one batched matmul: the FFN's multiply-adds,
  but one expert's weights read per token (not shared between tokens of the same expert).
Neither drops a token: there is **no capacity limit at export** beyond the model's own ``eval_capacity_factor``
(which the form applies exactly as eager mode does: a dropped token's routing weight is 0), and every expert's
weights stay in the file. With an ``eval_capacity_factor`` F (the model's, or ``--capacity_factor`` /
``capacity_factor=``, which sets it and records it in the exported ``config.json``) the FFN experts run in the
capacity form instead: each expert ``ceil(F · tokens / E)`` static slots, F × the FFN's multiply-adds, exactly what
the PyTorch model with that factor computes (tokens over an expert's capacity dropped, as Switch Transformers do). Routing (argmax, hash table lookup) is part of the graph, so any input is routed at run
time; the parity check below runs on an input other than the conversion example.

**int8.** ``--quantize int8`` adds ``model_int8.tflite``: ai-edge-quantizer's dynamic-range recipe
(``dynamic_wi8_afp32``: weights int8 per output channel, activations float, quantized on the fly inside the int8
kernels) — the TFLite counterpart of the ONNX export's dynamic int8.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..training.output_folders import check_export_output
from .moe_export_form import export_expert_form
from .onnx_exporter import PARITY_ATOL, NamedGraphOutputs, copy_folder_files, load_for_export, random_graph_inputs
from .tasks import GRAPH_INPUTS, ExportTask

__all__ = [
    "TFLITE_FILE",
    "TFLITE_INT8_FILE",
    "TfliteExportReport",
    "check_tflite_installed",
    "convert_to_tflite",
    "export_tflite",
    "quantize_tflite",
    "set_eval_capacity_factor",
    "tflite_feeds",
    "tflite_outputs",
]

TFLITE_FILE = "model.tflite"
TFLITE_INT8_FILE = "model_int8.tflite"
_REQUIRED_MODULES = {
    "litert_torch": "litert-torch",
    "ai_edge_litert": "ai-edge-litert",
    "ai_edge_quantizer": "ai-edge-quantizer",
}


@dataclass(frozen=True)
class TfliteExportReport:
    """What the export wrote, at which fixed shape, and how closely each file reproduces PyTorch."""

    tflite_path: Path
    task: str
    batch_size: int
    sequence_length: int
    max_abs_diff: float
    output_scale: float
    float_bytes: int
    seconds: float
    int8_path: Path | None = None
    int8_bytes: int | None = None
    int8_max_abs_diff: float | None = None


def check_tflite_installed() -> None:
    """Fail early, naming the missing packages, when the ``tflite`` extra is not installed."""
    missing = [package for module, package in _REQUIRED_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise ValueError(
            f"TFLite export needs {', '.join(missing)}: install the `tflite` extra "
            "(pip install 'compact-bert[tflite]'; it has its own environment in CI, see README)."
        )


def convert_to_tflite(model: nn.Module, output_names: tuple[str, ...], example: dict, path: Path) -> None:
    """Convert ``model`` (any transformers-style module taking the graph inputs) at ``example``'s shape to
    ``path``. Also used by the benchmarks for transformers' own BERT, so that every model converts the same way."""
    import litert_torch

    wrapped = NamedGraphOutputs(model.eval(), output_names, as_dict=True).eval()
    with torch.no_grad(), export_expert_form(model, routed=False):
        edge_model = litert_torch.convert(wrapped, sample_kwargs={name: example[name] for name in GRAPH_INPUTS})
    edge_model.export(str(path))


def set_eval_capacity_factor(model: nn.Module, capacity_factor: float) -> int:
    """Give every MoE FFN block of ``model`` the inference capacity ``capacity_factor`` (its router's and the
    config's ``eval_capacity_factor``); returns how many blocks. A model without MoE FFN blocks is refused."""
    if not capacity_factor > 0:
        raise ValueError(f"--capacity_factor must be > 0, got {capacity_factor}.")
    routers = [
        module.router
        for module in model.modules()
        if hasattr(module, "router") and hasattr(module, "experts") and hasattr(module.router, "eval_capacity_factor")
    ]
    if not routers:
        raise ValueError(
            "--capacity_factor applies to models with MoE FFN blocks (MiniMoE, MoE-BERT with num_experts > 1); "
            f"this {type(model).__name__} has none."
        )
    for router in routers:
        router.eval_capacity_factor = capacity_factor
    config = getattr(model, "config", None)
    if config is not None:
        config.eval_capacity_factor = capacity_factor
    return len(routers)


def tflite_outputs(
    tflite_path: Path, inputs: dict[str, torch.Tensor], threads: int | None = None
) -> dict[str, np.ndarray]:
    """Run a converted model once with LiteRT's interpreter; inputs must have the shape it was converted at."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(tflite_path), num_threads=threads).get_signature_runner()
    return runner(**tflite_feeds(runner, inputs, tflite_path))


def tflite_feeds(runner, inputs: dict[str, torch.Tensor], tflite_path: Path) -> dict[str, np.ndarray]:
    """The signature's inputs as int32 arrays, after checking the shape against the converted one."""
    details = runner.get_input_details()
    feeds = {}
    for name, detail in details.items():
        array = inputs[name].numpy().astype(np.int32)
        expected = tuple(int(size) for size in detail["shape"])
        if array.shape != expected:
            raise ValueError(
                f"{tflite_path} was converted for inputs of shape {expected} (batch, sequence length); got "
                f"{array.shape} for {name}: pad the batch to that shape, or export again with "
                "--sequence_length / --batch_size."
            )
        feeds[name] = array
    return feeds


def _max_difference(produced: dict, expected, export_task: ExportTask) -> tuple[float, float]:
    max_diff, scale = 0.0, 1.0
    for name in export_task.outputs:
        reference = expected[name].float().numpy()
        max_diff = max(max_diff, float(np.abs(produced[name] - reference).max()))
        scale = max(scale, float(np.abs(reference).max()))
    return max_diff, scale


def quantize_tflite(float_path: Path, int8_path: Path) -> None:
    """Dynamic-range int8 (ai-edge-quantizer's ``dynamic_wi8_afp32``) of a float TFLite model."""
    from ai_edge_quantizer import quantizer, recipe

    quantization = quantizer.Quantizer(str(float_path))
    quantization.load_quantization_recipe(recipe.dynamic_wi8_afp32())
    quantization.quantize(enable_progress_report=False).export_model(str(int8_path), overwrite=True)


def export_tflite(
    model_dir,
    output_dir,
    task: str,
    sequence_length: int,
    batch_size: int = 1,
    quantize: str | None = None,
    example_inputs: dict | None = None,
    capacity_factor: float | None = None,
) -> TfliteExportReport:
    """Convert ``model_dir``'s head for ``task`` at the fixed shape ``batch_size × sequence_length`` into
    ``output_dir/model.tflite`` (plus ``model_int8.tflite`` with ``quantize="int8"``), copy the config, remote code
    and tokenizer next to it, and check LiteRT's outputs against PyTorch's on an input other than the conversion
    example (fp32: within ``PARITY_ATOL`` × output scale, else ``RuntimeError``; int8: reported).

    ``capacity_factor``: the MoE FFN blocks' ``eval_capacity_factor`` for the exported model (``moe_export_form``'s
    capacity form; recorded in the copied ``config.json``); parity is checked against the model with it."""
    check_tflite_installed()
    if quantize not in (None, "int8"):
        raise ValueError(f"quantize must be None or 'int8', got {quantize!r}.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    started = time.perf_counter()
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    check_export_output(output_dir, model_dir)
    model, export_task = load_for_export(model_dir, task, sequence_length)
    if capacity_factor is not None:
        set_eval_capacity_factor(model, capacity_factor)
    output_dir.mkdir(parents=True, exist_ok=True)
    tflite_path = output_dir / TFLITE_FILE
    output_names = tuple(export_task.outputs)
    if example_inputs is None:
        example_inputs = random_graph_inputs(model.config, batch_size, sequence_length, seed=0)
    shapes = {name: tuple(example_inputs[name].shape) for name in GRAPH_INPUTS}
    if set(shapes.values()) != {(batch_size, sequence_length)}:
        raise ValueError(
            f"example_inputs must all have the fixed shape {(batch_size, sequence_length)}, got {shapes}."
        )
    convert_to_tflite(model, output_names, example_inputs, tflite_path)
    copy_folder_files(model_dir, output_dir, model)
    if export_task.name == "sentence-embedding":
        from .sentence_embedding_parity import copy_sentence_transformers_files

        copy_sentence_transformers_files(model_dir, output_dir)

    check = random_graph_inputs(model.config, batch_size, sequence_length, seed=1234)
    with torch.no_grad():
        expected = model(**check)
    max_diff, scale = _max_difference(tflite_outputs(tflite_path, check), expected, export_task)
    if max_diff > PARITY_ATOL * scale:
        raise RuntimeError(
            f"{tflite_path} differs from PyTorch by {max_diff:.3g} (output scale {scale:.3g}; tolerance "
            f"{PARITY_ATOL} × scale) on a check input: the conversion is wrong, do not ship it."
        )
    int8_path = int8_bytes = int8_diff = None
    if quantize == "int8":
        int8_path = output_dir / TFLITE_INT8_FILE
        quantize_tflite(tflite_path, int8_path)
        int8_bytes = int8_path.stat().st_size
        int8_diff, _ = _max_difference(tflite_outputs(int8_path, check), expected, export_task)
    return TfliteExportReport(
        tflite_path,
        task,
        batch_size,
        sequence_length,
        max_diff,
        scale,
        tflite_path.stat().st_size,
        round(time.perf_counter() - started, 1),
        int8_path,
        int8_bytes,
        int8_diff,
    )
