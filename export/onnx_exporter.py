"""``compact-bert export onnx``: an ONNX folder from a saved model folder, on both transformers lines.

A folder of transformers' own BERT-layout encoder (a dense student) is exported as BERT runtimes expect it on both
lines (``bert_onnx``): the TorchScript exporter on eager attention gives ``model.onnx``, standard ONNX, and ONNX
Runtime's BERT optimizer fuses it into ``model_optimized.onnx`` (one ``Attention`` per layer).

The compact-bert families go, where Optimum's ONNX exporter is installed (transformers 4.57 with the ``onnx``
extra), through ``optimum.exporters.onnx.main_export`` with our registered configs (``optimum_configs``). On
transformers 5, where optimum-onnx cannot be installed (optimum-onnx issues #114, #141), they are exported with
``torch.onnx.export(dynamo=True)``. Every path writes the same folder: ``model.onnx`` with the inputs of
``tasks.GRAPH_INPUTS`` and Optimum's output names, dynamic batch and sequence axes, next to ``config.json``,
any remote code and the tokenizer files, so that ``ORTModelFor*`` loads it where Optimum is installed and a
plain ``onnxruntime.InferenceSession`` runs it everywhere.

Either way the graph is checked before the command returns: onnxruntime must reproduce PyTorch's outputs on an
input other than the export example (another batch size and length, padding, and tokens routed to other
experts than the example's), within ``PARITY_ATOL`` relative to the output scale.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..configuration.dense_students import max_sequence_length
from ..training.output_folders import check_export_output
from .bert_onnx import (
    OPTIMIZED_FILE,
    BertGraphFusionError,
    export_bert_graph,
    exports_as_bert,
    optimize_bert_graph,
)
from .moe_export_form import export_expert_form
from .tasks import EXPORT_TASKS, GRAPH_INPUTS, ExportTask, check_export_folder, check_sequence_length, resolve_task

__all__ = [
    "ExportReport",
    "NamedGraphOutputs",
    "PARITY_ATOL",
    "copy_folder_files",
    "export_module_with_dynamo",
    "export_onnx",
    "load_for_export",
    "optimum_available",
    "parity_inputs",
    "random_graph_inputs",
]

logger = logging.getLogger(__name__)

# Largest accepted |onnxruntime − PyTorch| in fp32, relative to max(1, max |PyTorch output|).
PARITY_ATOL = 1e-4
# Files copied next to model.onnx when the model folder has them (tokenizer, and remote code for config.json's
# auto_map, so the folder's config also loads where compact-bert is not installed).
_COPIED_PATTERNS = ("tokenizer*", "vocab.txt", "special_tokens_map.json", "configuration_*.py", "modeling_*.py")


@dataclass
class ExportReport:
    """What an export wrote and how closely it reproduces PyTorch."""

    onnx_path: Path
    exporter: str
    task: str
    max_abs_diff: float  # the largest over every file written (model.onnx and, for BERT, model_optimized.onnx)
    output_scale: float
    fused_operators: dict = field(default_factory=dict)  # ONNX Runtime's fusions in model_optimized.onnx, if any


def optimum_available() -> bool:
    """Whether Optimum's ONNX exporter can be imported (it needs transformers < 4.58)."""
    # ``optimum`` can exist without its exporter: compact-bert itself installs the namespace package
    # ``optimum.commands.register`` (its optimum-cli plug-in), and then looking up ``optimum.exporters.onnx`` raises
    # instead of returning None, because its parent ``optimum.exporters`` is missing.
    try:
        return importlib.util.find_spec("optimum.exporters.onnx") is not None
    except ModuleNotFoundError:
        return False


def load_for_export(model_dir, task: str, sequence_length: int) -> tuple[nn.Module, ExportTask]:
    """The folder's head for ``task``, in eval mode, after the early checks of ``tasks`` (which read only
    ``config.json``, so that a bad request fails before any weight is loaded)."""
    import transformers

    from .. import modeling  # noqa: F401  (registers the Auto classes)
    from ..training.checked_loading import load_checked

    config_dict = check_export_folder(model_dir)
    export_task = resolve_task(task, config_dict.get("model_type"))
    check_sequence_length(sequence_length, config_dict.get("max_position_embeddings", 512))
    if export_task.name == "sentence-embedding":
        from ..embeddings.sentence_transformers_folder import load_sentence_embedder, read_embedding_head

        head = read_embedding_head(model_dir)  # a folder without sentence-transformers modules fails here
        return load_sentence_embedder(model_dir, head).eval(), export_task
    # A head the folder does not hold would be exported random (a base model exported as a token classifier).
    model = load_checked(
        getattr(transformers, export_task.auto_class), model_dir, "MODEL_DIR", require_every_weight=True
    )
    return model.eval(), export_task


class NamedGraphOutputs(nn.Module):
    """The head with the graph's inputs as arguments and only its task's outputs, so that the exported graph's
    inputs and outputs carry the task's names (``logits``, not ``linear_53``): a tuple for torch.onnx, which takes
    the names from ``output_names``; a dict (``as_dict``) for litert-torch, which names the signature's outputs
    after its keys."""

    def __init__(self, model: nn.Module, output_names: tuple[str, ...], as_dict: bool = False):
        super().__init__()
        self.model = model
        self.output_names = output_names
        self.as_dict = as_dict

    def forward(self, input_ids, attention_mask, token_type_ids):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        if self.as_dict:
            return {name: outputs[name] for name in self.output_names}
        return tuple(outputs[name] for name in self.output_names)


def random_graph_inputs(config, batch_size: int, sequence_length: int, seed: int) -> dict[str, torch.Tensor]:
    """Random ids whose last sequence is padded from its middle (from three quarters when it is the only one, so
    that a single sequence keeps most of its tokens), with token type 1 on the second half: masks and token types
    are exercised. Export examples and check inputs of both exporters."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, config.vocab_size, (batch_size, sequence_length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    padded_from = (3 * sequence_length) // 4 if batch_size == 1 else sequence_length // 2
    attention_mask[-1, max(1, padded_from) :] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, sequence_length // 2 :] = min(1, config.type_vocab_size - 1)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def parity_inputs(config, sequence_length: int) -> dict[str, torch.Tensor]:
    """A check input unlike the export example: batch 3, another length, other token ids and padding."""
    length = max(2, min(max_sequence_length(config), sequence_length * 2 + 3))
    return random_graph_inputs(config, 3, length, seed=1234)


def export_module_with_dynamo(
    model: nn.Module, output_names: tuple[str, ...], onnx_path: Path, example: dict, opset: int | None = None
) -> None:
    """``torch.onnx.export(dynamo=True)`` of any transformers-style module taking the graph inputs, with named
    outputs, dynamic batch and sequence axes and the MoE experts' ONNX export form. Also used by the benchmarks for
    transformers' own BERT, so that every model is exported the same way."""
    batch = torch.export.Dim("batch_size")
    sequence = torch.export.Dim("sequence_length", max=model.config.max_position_embeddings)
    dynamic_shapes = {name: {0: batch, 1: sequence} for name in GRAPH_INPUTS}
    with torch.no_grad(), export_expert_form(model, routed=True), without_exporter_noise():
        program = torch.onnx.export(
            NamedGraphOutputs(model, output_names).eval(),
            tuple(example[name] for name in GRAPH_INPUTS),
            dynamo=True,
            input_names=list(GRAPH_INPUTS),
            output_names=list(output_names),
            dynamic_shapes=dynamic_shapes,
            opset_version=opset,
            optimize=True,
            verbose=False,  # its progress lines (16 for an export with int8) are not the user's business
        )
    program.save(str(onnx_path), external_data=_parameter_bytes(model) > 1_800_000_000)


class _DropMessages(logging.Filter):
    def __init__(self, fragment: str):
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.getMessage()


@contextlib.contextmanager
def without_exporter_noise():
    """Silence what torch's ONNX exporter says about things that do not concern the export, which nothing here can
    fix at its cause: "torchvision is not installed. Skipping torchvision::nms" (four lines: its op registry
    looks for torchvision's ops whether or not a model uses them), a ``LeafSpec`` FutureWarning from its own
    pytree calls, and "The axis name: batch_size will not be used, since it shares the same shape constraints"
    (the axes are named as asked). Every other message passes."""
    registry = logging.getLogger("torch.onnx._internal.exporter._registration")
    torchvision_note = _DropMessages("torchvision is not installed")
    registry.addFilter(torchvision_note)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning
            )
            warnings.filterwarnings(
                "ignore", message=r"# The axis name: .* will not be used, since it shares", category=UserWarning
            )
            yield
    finally:
        registry.removeFilter(torchvision_note)


def _parameter_bytes(model: nn.Module) -> int:
    return sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())


def _export_with_optimum(model_dir: Path, output_dir: Path, task: str, opset: int | None) -> None:
    from optimum.exporters.onnx import main_export

    from .optimum_import_hook import register_when_optimum_is_imported

    register_when_optimum_is_imported()
    # Optimum's own validation runs on its dummy inputs; ours (below) runs on differently routed ones.
    main_export(
        str(model_dir),
        output=str(output_dir),
        task=task,
        opset=opset,
        library_name="transformers",
        do_validation=False,
    )


def copy_folder_files(model_dir: Path, output_dir: Path, model: nn.Module) -> None:
    model.config.save_pretrained(output_dir)
    for pattern in _COPIED_PATTERNS:
        for path in model_dir.glob(pattern):
            if path.is_file() and not (output_dir / path.name).exists():
                shutil.copy2(path, output_dir / path.name)


def check_opset(onnx_path: Path, requested: int | None) -> None:
    """An exporter may write another opset than the one asked for (torch.onnx writes at least 18 whatever
    ``opset_version`` says): a requested opset that the file does not have is an error, not a silent change."""
    if requested is None:
        return
    import onnx

    written = next(
        (
            entry.version
            for entry in onnx.load(str(onnx_path), load_external_data=False).opset_import
            if entry.domain in ("", "ai.onnx")
        ),
        None,
    )
    if written != requested:
        onnx_path.unlink(missing_ok=True)
        raise ValueError(
            f"--opset {requested}: the exporter wrote opset {written} instead (torch.onnx's dynamo exporter "
            "supports opset 18 and newer); ask for an opset it supports."
        )


def check_parity(onnx_path: Path, model: nn.Module, export_task: ExportTask, inputs: dict) -> tuple[float, float]:
    """Largest |onnxruntime − PyTorch| over the task's outputs and the outputs' scale; raises past tolerance."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    feeds = {name: inputs[name].numpy() for name in GRAPH_INPUTS}
    produced = dict(zip([output.name for output in session.get_outputs()], session.run(None, feeds)))
    with torch.no_grad():
        expected = model(**inputs)
    max_diff, scale = 0.0, 1.0
    for name in export_task.outputs:
        reference = expected[name]
        max_diff = max(max_diff, float((torch.from_numpy(produced[name]) - reference).abs().max()))
        scale = max(scale, float(reference.abs().max()))
    if max_diff > PARITY_ATOL * scale:
        raise RuntimeError(
            f"{onnx_path} differs from PyTorch by {max_diff:.3g} (output scale {scale:.3g}; tolerance "
            f"{PARITY_ATOL} × scale) on a check input: the export is wrong, do not ship it."
        )
    return max_diff, scale


def export_onnx(
    model_dir,
    output_dir,
    task: str,
    opset: int | None = None,
    sequence_length: int = 16,
    exporter: str = "auto",
    example_inputs: dict | None = None,
) -> ExportReport:
    """Export ``model_dir``'s head for ``task`` into ``output_dir`` and check it against PyTorch.

    ``exporter``: ``"optimum"``, ``"dynamo"``, ``"torchscript"``, or ``"auto"`` (TorchScript plus ONNX Runtime's BERT
    optimizer for a BERT-layout folder, else Optimum where it is installed, else dynamo).
    ``example_inputs``: the dynamo exporter's example (the graph's inputs by name, batch ≥ 2); by default random
    ids of ``sequence_length`` tokens. Optimum uses its own dummy inputs.
    """
    if exporter not in ("auto", "optimum", "dynamo", "torchscript"):
        raise ValueError(f"exporter must be 'auto', 'optimum', 'dynamo' or 'torchscript', got {exporter!r}.")
    if exporter == "optimum" and task in EXPORT_TASKS and EXPORT_TASKS[task].ort_model_class is None:
        raise ValueError(f"exporter='optimum' cannot export {task!r} (Optimum has no such task): use 'dynamo'.")
    if exporter == "optimum" and not optimum_available():
        raise ValueError("exporter='optimum' needs optimum-onnx (the `onnx` extra, transformers < 4.58).")
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    check_export_output(output_dir, model_dir)
    model, export_task = load_for_export(model_dir, task, sequence_length)
    output_dir.mkdir(parents=True, exist_ok=True)
    # Everything is written into a staging folder inside OUT and moved into place only once checked: an interrupted,
    # failed or out-of-space export leaves no half-written model.onnx that a later run would use.
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=output_dir))
    try:
        report = _export_checked(
            model_dir, staging, model, export_task, opset, sequence_length, exporter, example_inputs
        )
        (output_dir / OPTIMIZED_FILE).unlink(missing_ok=True)  # a fused graph of an earlier export is not this one's
        for path in sorted(staging.iterdir()):
            target = output_dir / path.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(path, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dataclasses.replace(report, onnx_path=output_dir / report.onnx_path.name)


def _export_checked(
    model_dir: Path, output_dir: Path, model, export_task, opset, sequence_length, exporter, example_inputs
):
    """The export of ``export_onnx`` into ``output_dir`` (its staging folder), checked against PyTorch."""
    task = export_task.name
    onnx_path = output_dir / "model.onnx"
    if exporter == "auto":
        if exports_as_bert(model.config.model_type):
            exporter = "torchscript"
        elif optimum_available() and export_task.ort_model_class is not None:
            exporter = "optimum"
        else:
            exporter = "dynamo"
    if example_inputs is None:
        example_inputs = random_graph_inputs(model.config, 2, sequence_length, seed=0)
    if exporter == "optimum":
        _export_with_optimum(model_dir, output_dir, task, opset)
    elif exporter == "torchscript":
        export_bert_graph(model, export_task.outputs, onnx_path, example_inputs, opset)
    else:
        export_module_with_dynamo(model, tuple(export_task.outputs), onnx_path, example_inputs, opset)
    copy_folder_files(model_dir, output_dir, model)
    check_opset(onnx_path, opset)
    checks = parity_inputs(model.config, sequence_length)
    max_diff, scale = check_parity(onnx_path, model, export_task, checks)
    fused = {}
    if exporter == "torchscript":
        try:
            fused = optimize_bert_graph(onnx_path, model.config)
        except BertGraphFusionError as error:  # model.onnx, standard and checked, ships alone
            logger.warning("No fused graph written: %s", error)
        else:
            max_diff = max(max_diff, check_parity(output_dir / OPTIMIZED_FILE, model, export_task, checks)[0])
    if export_task.name == "sentence-embedding":
        from .sentence_embedding_parity import check_sentence_transformers_parity, copy_sentence_transformers_files

        copy_sentence_transformers_files(model_dir, output_dir)
        max_diff = max(max_diff, check_sentence_transformers_parity(onnx_path, model_dir))
    return ExportReport(onnx_path, exporter, task, max_diff, scale, fused)
