"""``compact-bert benchmark DIR_OR_PRESET``: latency of one model in every runtime it can run in, side by side.

Runtimes: ``eager`` (PyTorch, eval, inference mode), ``optimized`` (eager after ``optimize_for_inference``:
oneDNN-packed, fused projections where they pay here), ``compiled`` (``torch.compile``, dynamic shapes, inductor
with freezing), ``onnx`` / ``onnx-int8`` (onnxruntime on ``DIR/onnx/model.onnx`` and ``model_quantized.onnx``,
written by ``compact-bert export onnx DIR DIR/onnx --task ... [--quantize int8]``), ``tflite`` / ``tflite-int8``
(LiteRT's interpreter on ``DIR/tflite/model.tflite`` and ``model_int8.tflite``, written by ``compact-bert export
tflite DIR DIR/tflite --task ... --sequence_length N [--quantize int8]``; measured only at the batch size and
length they were converted for). All candidates of one shape run interleaved in one process (``evaluation.runtime_latency``), so ratios between them hold on a busy machine.
``--write_latency`` stores one shape's numbers as the folder's ``latency.json`` and re-writes its model card, whose
latency section reads that file.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from ..training.argument_checks import check_output_dir_creatable, check_output_file
from ..training.run_errors import RunSettingsError

__all__ = ["RUNTIMES", "add_parser", "run"]

RUNTIMES = ("eager", "optimized", "compiled", "onnx", "onnx-int8", "tflite", "tflite-int8")
_EXPORTED_FILES = {
    "onnx": "onnx/model.onnx",
    "onnx-int8": "onnx/model_quantized.onnx",
    "tflite": "tflite/model.tflite",
    "tflite-int8": "tflite/model_int8.tflite",
}
_EXPORT_COMMANDS = {
    "onnx": "compact-bert export onnx DIR DIR/onnx --task ...",
    "tflite": "compact-bert export tflite DIR DIR/tflite --task ... --sequence_length N",
}
# The head class that a folder's saved architecture names, so that eager times the same graph as the export.
_HEAD_SUFFIXES = (
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
    "ForMaskedLM",
    "ForPreTraining",
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "benchmark",
        help="Latency (median, p90) of a model folder or preset: eager, compiled, ONNX Runtime and TFLite fp32 / int8.",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument(
        "model", metavar="DIR_OR_PRESET", help="A saved model folder or a preset name (random weights)."
    )
    parser.add_argument("--batch_sizes", type=int, nargs="+", default=[1], help="Sequences per call (default 1).")
    parser.add_argument("--sequence_lengths", type=int, nargs="+", default=[128], help="Tokens per sequence.")
    parser.add_argument(
        "--runtimes",
        nargs="+",
        choices=RUNTIMES,
        default=None,
        help="Default: eager, optimized and compiled, plus onnx / onnx-int8 / tflite / tflite-int8 where the folder "
        "has the files.",
    )
    parser.add_argument("--rounds", type=int, default=20, help="Timed calls per runtime and shape.")
    parser.add_argument("--warmup", type=int, default=3, help="Untimed calls first (compilation happens here).")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch, onnxruntime and LiteRT.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the measurements to this JSON file.")
    parser.add_argument(
        "--write_latency",
        action="store_true",
        help="Store the first batch size x length as DIR/latency.json and re-write DIR's model card.",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="With --write_latency: re-write the model card even if it was edited since compact-bert wrote it.",
    )
    parser.set_defaults(handler=run)


def _fail(message: str):
    raise SystemExit(f"compact-bert benchmark: {message}")


def _check_arguments(args: argparse.Namespace) -> tuple[Path | None, list[str]]:
    """The model folder (``None`` for a preset) and the runtimes to measure; every bad value fails here."""
    from ..configuration import PRESETS

    for flag in ("batch_sizes", "sequence_lengths"):
        bad = [value for value in getattr(args, flag) if value < 1]
        if bad:
            _fail(f"--{flag} must be positive integers, got {bad}.")
    if args.rounds < 1 or args.warmup < 0:
        _fail(f"--rounds must be >= 1 and --warmup >= 0, got {args.rounds} and {args.warmup}.")
    if args.threads is not None and args.threads < 1:
        _fail(f"--threads must be >= 1, got {args.threads}.")
    folder = Path(args.model)
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            _fail(f"{folder} has no config.json: give a folder written by save_pretrained, or a preset name.")
    elif args.model in PRESETS:
        folder = None
    else:
        _fail(f"{args.model!r} is neither a model folder nor a preset; presets: {', '.join(sorted(PRESETS))}.")
    if args.write_latency and folder is None:
        _fail("--write_latency needs a model folder (a preset has nowhere to keep latency.json).")
    try:  # before measuring, so that the measurement is not lost at the end
        check_output_file(args.json, "json")
        if args.write_latency:
            check_output_dir_creatable(folder, "write_latency: the model folder")
            _refuse_to_overwrite_an_edited_card(folder, args.force)
    except RunSettingsError as error:
        _fail(str(error))
    available = [name for name, file in _EXPORTED_FILES.items() if folder is not None and (folder / file).is_file()]
    runtimes = list(dict.fromkeys(args.runtimes or ["eager", "optimized", "compiled", *available]))
    for name in runtimes:
        if name in _EXPORTED_FILES and name not in available:
            where = "a preset has no export" if folder is None else f"{folder / _EXPORTED_FILES[name]} does not exist"
            _fail(
                f"--runtimes {name}: {where}; export first with `{_EXPORT_COMMANDS[name.split('-')[0]]}"
                f"{' --quantize int8' if name.endswith('-int8') else ''}`."
            )
    if any(name.startswith("tflite") for name in runtimes):
        _check_tflite_shapes(args, folder, runtimes, explicit=args.runtimes is not None)
    return folder, runtimes


def _converted_shape(path: Path) -> tuple[int, int]:
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_path=str(path)).get_signature_runner().get_input_details()
    return tuple(int(size) for size in details["input_ids"]["shape"])


def _check_tflite_shapes(args: argparse.Namespace, folder: Path, runtimes: list[str], explicit: bool) -> None:
    """A TFLite model runs only at its converted shape: asked for explicitly, some requested shape must be it;
    found by default, it is dropped (with a note) when none is."""
    try:
        import ai_edge_litert  # noqa: F401
    except ImportError:
        if explicit:
            _fail("--runtimes tflite needs ai-edge-litert: install the `tflite` extra.")
        print("Note: the folder has TFLite files, but ai-edge-litert is not installed (the `tflite` extra): skipped.")
        runtimes[:] = [name for name in runtimes if not name.startswith("tflite")]
        return
    requested = {(batch, length) for batch in args.batch_sizes for length in args.sequence_lengths}
    for name in [name for name in runtimes if name.startswith("tflite")]:
        shape = _converted_shape(folder / _EXPORTED_FILES[name])
        if shape in requested:
            continue
        message = (
            f"{folder / _EXPORTED_FILES[name]} runs only at batch {shape[0]} x length {shape[1]}, which is "
            f"not among the requested shapes: pass --batch_sizes {shape[0]} --sequence_lengths {shape[1]}"
        )
        if explicit:
            _fail(message + ".")
        print(f"Note: {message} to measure it; skipped.")
        runtimes.remove(name)


def _load_model(args: argparse.Namespace, folder: Path | None):
    import torch
    import transformers

    from .. import modeling  # noqa: F401  (registers the Auto classes)
    from ..configuration import preset_config

    if folder is None:
        torch.manual_seed(0)
        return transformers.AutoModel.from_config(preset_config(args.model)).eval()
    config = transformers.AutoConfig.from_pretrained(folder)
    architecture = (getattr(config, "architectures", None) or [""])[0]
    suffix = next((suffix for suffix in _HEAD_SUFFIXES if architecture.endswith(suffix)), None)
    auto_class = getattr(transformers, f"AutoModel{suffix}") if suffix else transformers.AutoModel
    from ..training.checked_loading import WeightsLoadError, load_checked

    try:
        return load_checked(auto_class, folder, "MODEL").eval()
    except WeightsLoadError as error:
        _fail(str(error))


def _runners(model, folder: Path | None, runtimes: list[str], inputs: dict, compiled, threads: int | None) -> dict:
    """The runners of one shape; a TFLite file converted for another shape has none."""
    from ..evaluation.runtime_latency import eager_runner, onnxruntime_runner, tflite_runner

    runners = {}
    for name in runtimes:
        if name == "eager":
            runners[name] = eager_runner(model, inputs)
        elif name == "optimized":
            runners[name] = eager_runner(copy.deepcopy(model), inputs, optimize=True)
        elif name == "compiled":
            runners[name] = eager_runner(compiled, inputs)
        elif name.startswith("onnx"):
            runners[name] = onnxruntime_runner(folder / _EXPORTED_FILES[name], inputs, threads)
        elif _converted_shape(folder / _EXPORTED_FILES[name]) == tuple(inputs["input_ids"].shape):
            runners[name] = tflite_runner(folder / _EXPORTED_FILES[name], inputs, threads)
    return runners


def run(args: argparse.Namespace) -> int:
    import torch

    from ..evaluation.runtime_latency import latency_inputs, measure_interleaved

    folder, runtimes = _check_arguments(args)
    model = _load_model(args, folder)
    limit = model.config.max_position_embeddings
    too_long = [length for length in args.sequence_lengths if length > limit]
    if too_long:
        _fail(f"--sequence_lengths {too_long} exceed the model's max_position_embeddings ({limit}).")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    compiled = None
    if "compiled" in runtimes:
        compiled = torch.compile(model, dynamic=True, options={"freezing": True})
    rows = []
    for batch_size in args.batch_sizes:
        for length in args.sequence_lengths:
            inputs = latency_inputs(model.config.vocab_size, batch_size, length)
            measured = measure_interleaved(
                _runners(model, folder, runtimes, inputs, compiled, args.threads),
                rounds=args.rounds,
                warmup=args.warmup,
            )
            for name, latency in measured.items():
                rows.append(
                    {
                        "runtime": name,
                        "batch_size": batch_size,
                        "sequence_length": length,
                        "median_ms": latency.median_ms,
                        "p90_ms": latency.p90_ms,
                        "vs_eager": round(latency.median_ms / measured["eager"].median_ms, 3)
                        if "eager" in measured
                        else None,
                    }
                )
    _print_table(args.model, rows)
    if args.json is not None:
        args.json.write_text(json.dumps({"model": args.model, "rows": rows}, indent=2) + "\n")
    if args.write_latency:
        _write_latency(folder, rows, args.batch_sizes[0], args.sequence_lengths[0])
    return 0


def _print_table(model: str, rows: list[dict]) -> None:
    print(f"Latency of {model} (ms per call; median and p90 of interleaved rounds):")
    print(f"{'runtime':<12} {'batch':>5} {'length':>6} {'median':>9} {'p90':>9}  vs eager")
    for row in rows:
        ratio = "" if row["vs_eager"] is None else speed_against_eager(row["vs_eager"])
        print(
            f"{row['runtime']:<12} {row['batch_size']:>5} {row['sequence_length']:>6} {row['median_ms']:>9.2f} "
            f"{row['p90_ms']:>9.2f}  {ratio}"
        )


def speed_against_eager(time_ratio: float) -> str:
    """``time_ratio`` (this runtime's median over eager's) in words: ``2.10x faster``, ``1.43x slower``, ``same``."""
    if round(time_ratio, 2) == 1.0:
        return "same" if time_ratio != 1.0 else "(reference)"
    return f"{1 / time_ratio:.2f}x faster" if time_ratio < 1 else f"{time_ratio:.2f}x slower"


def _refuse_to_overwrite_an_edited_card(folder: Path, force: bool) -> None:
    from ..model_cards.model_card import MODEL_CARD_FILE, card_was_edited

    if not force and card_was_edited(folder / MODEL_CARD_FILE):
        _fail(
            f"--write_latency: {folder / MODEL_CARD_FILE} was edited since compact-bert wrote it (or was written by "
            "another tool), and re-writing the card would lose that: pass --force to re-write it, or run without "
            "--write_latency and add the numbers by hand."
        )


def _write_latency(folder: Path, rows: list[dict], batch_size: int, length: int) -> None:
    from ..evaluation.latency_report import LatencyReport, RuntimeLatency, write_latency
    from ..evaluation.runtime_latency import device_description
    from ..model_cards import write_model_card

    runtimes = {}
    for row in rows:
        if row["batch_size"] == batch_size and row["sequence_length"] == length:
            file = _EXPORTED_FILES.get(row["runtime"])
            precision = "int8" if row["runtime"].endswith("-int8") else "float32"
            runtimes[row["runtime"]] = RuntimeLatency(row["median_ms"], row["p90_ms"], file, precision)
    path = write_latency(folder, LatencyReport(length, batch_size, device_description(), runtimes))
    write_model_card(folder)
    print(f"Wrote {path} and the model card {folder / 'README.md'}.")
