"""Latency of one model in every runtime it can run in, measured side by side.

Shared by ``compact-bert benchmark``, the main job's summary, the model card's ``latency.json`` and the scripts in
``benchmarks/``, so that every latency the project reports is measured the same way: candidates run interleaved,
round after round, in one process, so that noise on a shared machine hits all of them alike; each is reported
as the median and the 90th percentile of its rounds.

Runtimes in one process share the cores, and each keeps its own thread pool: a pool that spin-waits after its
call (onnxruntime by default, and PyTorch's OpenMP threads) steals the cores from the next runtime's call.
Measured on the main job's classifier at batch 1 x 128 on 2 cores: eager PyTorch alone 10.5 ms, interleaved with a
spinning onnxruntime session 24 ms (p90 60 ms). So onnxruntime sessions here are built with spinning off. PyTorch's
OpenMP workers still spin for several milliseconds after each forward (libgomp's spin count; ~10 ms on a 2-core AMD
EPYC), longer than a tiny model's whole call: a 3-layer student's onnxruntime call right after a PyTorch call took
5.9-6.5 ms instead of 5.1-5.2 (``benchmarks/bench_runtime_settle.py``), which put the same two models' ONNX latency
ratio at 0.31-0.33 instead of 0.26-0.27. So each runner is called only after ``SETTLE_MS`` of sleep,
which lets the previous runner's threads go idle, then once untimed (its own pool warm, as under steady load) and
then once timed. (A deployment that runs only onnxruntime may keep spinning on: it was 5-10% faster alone.)

A *runner* is a no-argument callable that does one forward pass on fixed inputs. ``eager_runner`` builds one for
a PyTorch module (a compiled module included), ``onnxruntime_runner`` for an ``.onnx`` file, ``tflite_runner`` for a
``.tflite`` file (LiteRT's interpreter, at the shape the file was converted with).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .latency_report import RuntimeLatency

__all__ = [
    "SETTLE_MS",
    "device_description",
    "eager_runner",
    "latency_inputs",
    "measure_interleaved",
    "measure_interleaved_samples",
    "onnxruntime_runner",
    "tflite_runner",
]

# How long each runner waits before its calls, so that the previous runner's spinning threads have gone idle
# (PyTorch's OpenMP workers spin for up to ~10 ms after a forward on the 2-core hosts measured; module docstring).
SETTLE_MS = 20.0

# The graph inputs every exported compact-bert model takes, in order.
_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def latency_inputs(vocab_size: int, batch_size: int, sequence_length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random token ids without padding: latency does not depend on the ids, and a fixed seed keeps every runtime
    on the same input."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, vocab_size, (batch_size, sequence_length), generator=generator)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
    }


def eager_runner(
    model: torch.nn.Module, inputs: dict[str, torch.Tensor], optimize: bool = False
) -> Callable[[], object]:
    """One eval-mode forward under ``torch.inference_mode`` (the mode a deployed model runs in); with ``optimize``,
    of the model after ``optimize_for_inference`` at the inputs' size (compact-bert's CPU path: packed, fused
    projections where they pay on this machine; the model is changed in place)."""
    model.eval()
    if optimize:
        from ..optimization import optimize_for_inference

        optimize_for_inference(model, tokens=inputs["input_ids"].numel())

    def run():
        with torch.inference_mode():
            return model(**inputs)

    return run


def onnxruntime_runner(onnx_path: str | Path, inputs: dict[str, torch.Tensor], threads: int | None = None):
    """One ``InferenceSession.run`` on the CPU provider; feeds only the inputs the graph declares (an exported
    model without token types has no ``token_type_ids`` input)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # see the module docstring
    if threads is not None:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    declared = {graph_input.name for graph_input in session.get_inputs()}
    unknown = declared - set(_INPUT_NAMES)
    if unknown:
        raise ValueError(f"{onnx_path}: graph inputs {sorted(unknown)} are not among {list(_INPUT_NAMES)}.")
    feeds = {name: inputs[name].numpy() for name in _INPUT_NAMES if name in declared}
    return lambda: session.run(None, feeds)


def tflite_runner(tflite_path: str | Path, inputs: dict[str, torch.Tensor], threads: int | None = None):
    """One signature call of LiteRT's interpreter (XNNPACK on the CPU); ``inputs`` must have the converted shape
    (``ValueError`` naming it otherwise)."""
    from ai_edge_litert.interpreter import Interpreter

    from ..export.tflite_exporter import tflite_feeds

    runner = Interpreter(model_path=str(tflite_path), num_threads=threads).get_signature_runner()
    feeds = tflite_feeds(runner, inputs, Path(tflite_path))
    return lambda: runner(**feeds)


def measure_interleaved(
    runners: dict[str, Callable[[], object]], rounds: int = 30, warmup: int = 3, settle_ms: float = SETTLE_MS
) -> dict[str, RuntimeLatency]:
    """Median and 90th-percentile milliseconds per call of each runner, all measured in the same rounds; each timed
    call follows ``settle_ms`` of sleep and an untimed call of the same runner (module docstring)."""
    samples = measure_interleaved_samples(runners, rounds, warmup, settle_ms)
    return {name: _summary(values) for name, values in samples.items()}


def measure_interleaved_samples(
    runners: dict[str, Callable[[], object]], rounds: int = 30, warmup: int = 3, settle_ms: float = SETTLE_MS
) -> dict[str, list[float]]:
    """The milliseconds of every timed call of each runner, in round order (what ``measure_interleaved``
    summarises; the benchmarks print more than the median from it)."""
    if rounds < 1 or warmup < 0 or settle_ms < 0:
        raise ValueError(
            f"rounds must be >= 1, warmup >= 0 and settle_ms >= 0, got rounds={rounds}, warmup={warmup}, "
            f"settle_ms={settle_ms}."
        )
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(warmup):
        for run in runners.values():
            run()
    for _ in range(rounds):
        for name, run in runners.items():
            time.sleep(settle_ms / 1e3)
            run()
            start = time.perf_counter()
            run()
            samples[name].append((time.perf_counter() - start) * 1e3)
    return samples


def _summary(milliseconds: list[float]) -> RuntimeLatency:
    ordered = sorted(milliseconds)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return RuntimeLatency(median_ms=round(statistics.median(ordered), 3), p90_ms=round(p90, 3))


def _cpu_model() -> str:
    """`` (model name)`` from ``/proc/cpuinfo`` where the system has one: latencies differ between CPU models."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f" ({line.split(':', 1)[1].strip()})"
    except OSError:
        pass
    return ""


def device_description() -> str:
    """Where a latency was measured, for ``latency.json`` and the card: cores, architecture, library versions."""
    text = f"{os.cpu_count()}-core {platform.machine()} CPU{_cpu_model()}, torch {torch.__version__}"
    for package in ("onnxruntime", "ai-edge-litert"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            text += f", {package} {importlib.metadata.version(package)}"
    return text
