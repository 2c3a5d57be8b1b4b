"""One short console line per logging step; the full log stays in ``trainer_state.json`` and TensorBoard.

Trainer prints every log as a Python dict. A MoE run logs three routing numbers per block (largest and smallest
expert share, dropped fraction), so each of the main job's log lines ran to 500-600 characters. On the console
the routing numbers are summarised over blocks (the largest share of any block, the smallest, the largest dropped
fraction) and numbers are rounded; ``compact-bert --verbose`` (or ``COMPACT_BERT_VERBOSE=1``) keeps transformers'
own dicts. Only the console changes: callbacks that record logs (TensorBoard, the trainer state) see every key.
"""

from __future__ import annotations

import math
import os

from transformers.trainer_callback import PrinterCallback, ProgressCallback

from .routing_keys import ROUTING_KEY

__all__ = ["VERBOSE_VARIABLE", "ConcisePrinterCallback", "ConciseProgressCallback", "concise_line", "verbose"]

VERBOSE_VARIABLE = "COMPACT_BERT_VERBOSE"
_HIDDEN = {"total_flos", "epoch", "step"}


def verbose() -> bool:
    """Whether the console shows transformers' full log dicts."""
    return os.environ.get(VERBOSE_VARIABLE, "").lower() in ("1", "true", "yes")


def _number(value) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(number):  # an fp16 step's skipped gradient, a constant prediction's correlation
        return str(number)
    if number == int(number) and abs(number) < 1e6:
        return str(int(number))
    return f"{number:.3g}" if abs(number) < 1e-2 or abs(number) >= 1e4 else f"{number:.4f}".rstrip("0").rstrip(".")


def concise_line(logs: dict, global_step: int, max_steps: int) -> str:
    """``step 50/282 (epoch 0.53) | loss 0.6048 | ... | experts: share 0.12-0.37, dropped 0%``; routing numbers
    summarised over blocks (smallest of the smallest shares, largest of the largest, largest dropped fraction)."""
    routing: dict[tuple[str, str], list[float]] = {}
    values = []
    for key, value in logs.items():
        match = ROUTING_KEY.match(key)
        if match:
            routing.setdefault((match["prefix"] or "", match["statistic"]), []).append(float(value))
        elif key not in _HIDDEN:
            values.append(f"{key} {_number(value)}")
    head = f"step {global_step}/{max_steps}" + (f" (epoch {float(logs['epoch']):.2f})" if "epoch" in logs else "")
    for prefix in sorted({prefix for prefix, _ in routing}):
        parts = []
        if (prefix, "max_expert_share") in routing:
            low = min(routing.get((prefix, "min_expert_share"), routing[(prefix, "max_expert_share")]))
            parts.append(f"share {low:.2f}-{max(routing[(prefix, 'max_expert_share')]):.2f}")
        if (prefix, "dropped_fraction") in routing:
            parts.append(f"dropped {100 * max(routing[(prefix, 'dropped_fraction')]):.0f}%")
        values.append(
            f"{prefix}experts ({len(routing.get((prefix, 'max_expert_share'), []))} blocks): " + ", ".join(parts)
        )
    return " | ".join([head, *values])


class ConcisePrinterCallback(PrinterCallback):
    """transformers' printer (no tqdm), one ``concise_line`` per log."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_local_process_zero and logs:
            print(concise_line(logs, state.global_step, state.max_steps), flush=True)


class ConciseProgressCallback(ProgressCallback):
    """transformers' progress bar, one ``concise_line`` per log written above it."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and self.training_bar is not None:
            self.training_bar.write(concise_line(logs, state.global_step, state.max_steps))
