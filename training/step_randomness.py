"""Training randomness drawn from the optimizer step, so that a run resumed from a checkpoint continues the same run.

A ``DataLoader`` collates the next batch before the current step ends, and Trainer saves the global random state
with each checkpoint and restores it on resume at a point that does not match the uninterrupted run (after the
consumed batches are skipped, around a fresh ``iter`` of the loader, which itself draws from that state). Anything
drawn from the global state - MLM masks at collation, dropout, sampled token groups - therefore differs after a
resume. ``CompactBertTrainer`` (with ``draws_randomness_from_step``) therefore draws every random value of a
training micro-batch from generators seeded with ``(--seed, optimizer step, micro-batch index within the
accumulation, process index)``, and of an evaluation batch with ``(--seed, evaluation batch index, process index)``:
a kill-and-resume ends bitwise equal to the uninterrupted run, and every evaluation of a run sees the same masks.
These are the seeds and the drawing; the trainer decides when.
"""

from __future__ import annotations

import contextlib
import hashlib

import torch

__all__ = ["draw_training_targets", "run_seed", "seeded_generator", "seeded_global_randomness", "step_seed"]


def step_seed(*parts) -> int:
    """A 63-bit seed that depends on every part (ints and strings), with no correlation between neighbours."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def run_seed(args, purpose: str, *position) -> int:
    """The seed of ``purpose`` at ``position`` (step, micro-batch; or evaluation batch) in this process of a run."""
    return step_seed(args.seed, purpose, *position, args.process_index)


def seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def draw_training_targets(collator, batch, seed: int):
    """The batch with its MLM masks / NSP pairs drawn, when its collator leaves them to the trainer (a collator
    with ``draw_training_targets``, such as ``distillation.data.PretrainingCollator``, and a batch without
    ``labels``); any other batch unchanged."""
    draw = getattr(collator, "draw_training_targets", None)
    if callable(draw) and isinstance(batch, dict) and "labels" not in batch:
        return draw(batch, seeded_generator(seed))
    return batch


@contextlib.contextmanager
def seeded_global_randomness(seed: int):
    """Run the body with the global generators (CPU and the current CUDA device) seeded, restoring them after:
    dropout inside a step then depends on the step only."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
