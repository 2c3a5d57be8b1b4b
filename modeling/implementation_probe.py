"""Which inference implementation is fastest on this machine: measured once, kept on disk.

Why: whether oneDNN's packed, epilogue-fused GEMM beats ``nn.Linear``, and which expert kernel is fastest, depends
on the CPU, the torch build, the thread count and the shapes. On this project's 2-core AVX2 EPYC the fused path
takes 0.6-0.9x the time of MiniLM's 384 → 1536 GELU projection and 1.1-2.9x that of MobileBERT's 128-wide ones;
on a 2-core AVX-512 EPYC it paid for MobileBERT from batch 1. A constant tuned on one machine is wrong on the
other, so ``dense_implementation="auto"`` and ``moe_implementation="auto"`` read answers measured here:

- **dense**: per call shape (what follows the GEMM, the widths, the rows rounded up to a power of two), the fused
  dense path's time over the plain modules' (``dense_implementations.probed_fusion``, which overrides the fixed
  rule only where the ratio is clear), measured the first time a shape is seen (milliseconds to a few hundred);
- **experts**: per call shape (experts, widths, tokens rounded up to a power of two), the fastest of the registered
  expert implementations at inference (``moe_implementations.probed_expert_kernel``), measured the first time a
  shape is seen.

Each answer is timed with interleaved rounds (medians) and written, under what it was measured on (CPU model, torch
version, thread count), to ``implementation_probe.json`` under ``$COMPACT_BERT_CACHE`` (else
``$XDG_CACHE_HOME/compact_bert``, else ``~/.cache/compact_bert``). Another machine, torch or thread count measures
again; delete the file to measure again here. ``COMPACT_BERT_PROBE=off`` measures nothing and takes each answer's
fixed fallback (fusing from 2^25 multiply-adds per call, the rule before the probe; oneDNN experts): the test suite
uses it so that every test process makes the same choices.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

__all__ = [
    "CHOICE_MARGIN",
    "compact_bert_cache_root",
    "forget_probed_choices",
    "machine_key",
    "on_forget",
    "probe_file",
    "probed_choice",
    "record_probe",
]

# A faster implementation must be this much faster (time ratio) to be chosen: timing noise must not flip a default.
CHOICE_MARGIN = 0.97


def compact_bert_cache_root() -> Path:
    """``$COMPACT_BERT_CACHE``, else ``$XDG_CACHE_HOME/compact_bert``, else ``~/.cache/compact_bert``."""
    root = os.environ.get("COMPACT_BERT_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "compact_bert"
    )
    return Path(root)


def probe_file() -> Path:
    return compact_bert_cache_root() / "implementation_probe.json"


def machine_key() -> str:
    """What a measurement holds for: the CPU model, the torch version and the number of threads."""
    return f"{_cpu_model()} | torch {torch.__version__} | {torch.get_num_threads()} threads"


@functools.cache
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def probed_choice(name: str, measure: Callable[[], object], fallback: object) -> object:
    """The measured answer ``name`` for this machine: from the probe file, else ``measure()`` (then saved);
    ``fallback`` with ``COMPACT_BERT_PROBE=off``. Looked up once per process and name (``functools.cache``)."""
    return _probed_choice(name, measure, fallback, machine_key())


@functools.cache
def _probed_choice(name: str, measure: Callable[[], object], fallback: object, key: str) -> object:
    if os.environ.get("COMPACT_BERT_PROBE", "").lower() == "off":
        return fallback
    saved = _read_probe_file().get(key, {})
    if name in saved:
        return saved[name]
    # The probe must not run in whatever autocast, inference or grad mode first asks for the answer (its packed
    # copies keep version counters, which inference tensors lack).
    with torch.autocast("cpu", enabled=False), torch.inference_mode(False), torch.no_grad():
        value = measure()
    record_probe(name, value, key)
    return value


# What ``forget_probed_choices`` clears besides this module's cache: the derived caches of the implementations.
_FORGET_CALLBACKS: list[Callable[[], None]] = []


def on_forget(callback: Callable[[], None]) -> None:
    _FORGET_CALLBACKS.append(callback)


def forget_probed_choices() -> None:
    """Drop every answer this process remembers (the file stays): the next lookup reads the file, or measures."""
    _probed_choice.cache_clear()
    for callback in _FORGET_CALLBACKS:
        callback()


def _read_probe_file() -> dict:
    try:
        entries = json.loads(probe_file().read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def record_probe(name: str, value: object, key: str | None = None) -> None:
    """Save one measured answer for ``key`` (this machine by default); the file is replaced atomically, so
    processes probing at the same time never leave it half written."""
    key = key or machine_key()
    entries = _read_probe_file()
    entries.setdefault(key, {})[name] = value
    path = probe_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(entries, indent=1, sort_keys=True))
        os.replace(partial, path)
    except OSError:
        pass  # a read-only cache: the answer still holds for this process


def median_seconds(calls: dict[str, Callable[[], object]], rounds: int = 7) -> dict[str, float]:
    """The median time of each call over ``rounds`` interleaved rounds (one warm-up call each first)."""
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for call in calls.values():
        call()
    for _ in range(rounds):
        for label, call in calls.items():
            start = time.perf_counter()
            call()
            samples[label].append(time.perf_counter() - start)
    return {label: statistics.median(times) for label, times in samples.items()}
