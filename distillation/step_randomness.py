"""Training randomness drawn from the optimizer step, so that a run resumed from a checkpoint continues the same run.

A ``DataLoader`` collates the next batch before the current step ends, and Trainer saves the global random state
with each checkpoint and restores it on resume at a point that does not match the uninterrupted run (after the
consumed batches are skipped, around a fresh ``iter`` of the loader, which itself draws from that state). Anything
drawn from the global state - MLM masks at collation, dropout, sampled token groups - therefore differs after a
resume. Here every random draw of a training micro-batch comes from generators seeded with
``(--seed, optimizer step, micro-batch index within the accumulation, process index)``, and of an evaluation batch
with ``(--seed, evaluation batch index, process index)``: a kill-and-resume ends bitwise equal to the
uninterrupted run, and every evaluation of a run sees the same masks.
"""

from __future__ import annotations

import contextlib
import hashlib

import torch

from .data import PretrainingCollator

__all__ = ["StepSeededRandomnessMixin", "step_seed"]


def step_seed(*parts) -> int:
    """A 63-bit seed that depends on every part (ints and strings), with no correlation between neighbours."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class StepSeededRandomnessMixin:
    """Trainer mixin: MLM masks / NSP pairs (a ``PretrainingCollator``'s ``draw_training_targets``), dropout and
    any sampling in a loss (``step_generator``) depend on the step, never on the global random state's history.

    - Masks are drawn in ``get_batch_samples``, which fetches the micro-batches of one optimizer step before any of
      them is trained: the number of masked tokens is then known when Trainer counts ``num_items_in_batch``.
    - Dropout: each ``training_step`` runs with the global generators (CPU and the current CUDA device) seeded for
      that micro-batch and restored afterwards (``torch.random.fork_rng``).
    - Losses that sample (TCD's token groups) call ``step_generator(purpose)`` inside ``compute_loss``.
    """

    _step_seed: int | None = None
    _micro_batch_step: int | None = None
    _micro_batch_index = 0
    _evaluation_batch_index = 0
    _unscoped_generators: dict

    # -- seeds ---------------------------------------------------------------------------------------
    def _seed(self, purpose: str, *position) -> int:
        return step_seed(self.args.seed, purpose, *position, self.args.process_index)

    def step_generator(self, purpose: str) -> torch.Generator:
        """A CPU generator for ``purpose`` in the current micro-batch (training) or batch (evaluation). Outside a
        step (``compute_loss`` called directly) a generator per purpose, seeded once from ``--seed``, is advanced."""
        if self._step_seed is not None:
            return _generator(step_seed(self._step_seed, purpose))
        if not hasattr(self, "_unscoped_generators"):
            self._unscoped_generators = {}
        if purpose not in self._unscoped_generators:
            self._unscoped_generators[purpose] = _generator(self._seed(purpose, "outside a step"))
        return self._unscoped_generators[purpose]

    @contextlib.contextmanager
    def _seeded_randomness(self, seed: int):
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            self._step_seed = seed
            try:
                yield
            finally:
                self._step_seed = None

    def _with_training_targets(self, batch, seed: int):
        """The batch with its MLM masks / NSP pairs drawn, when its collator left them to the trainer."""
        collator = self.data_collator
        if isinstance(collator, PretrainingCollator) and isinstance(batch, dict) and "labels" not in batch:
            return collator.draw_training_targets(batch, _generator(seed))
        return batch

    # -- training ------------------------------------------------------------------------------------
    def get_batch_samples(self, epoch_iterator, num_batches, *args, **kwargs):
        step = self.state.global_step

        def with_targets():
            for index, batch in enumerate(epoch_iterator):
                yield self._with_training_targets(batch, self._seed("training targets", step, index))

        return super().get_batch_samples(with_targets(), num_batches, *args, **kwargs)

    def training_step(self, model, inputs, *args, **kwargs):
        step = self.state.global_step
        self._micro_batch_index = self._micro_batch_index + 1 if self._micro_batch_step == step else 0
        self._micro_batch_step = step
        with self._seeded_randomness(self._seed("training step", step, self._micro_batch_index)):
            return super().training_step(model, inputs, *args, **kwargs)

    # -- evaluation ----------------------------------------------------------------------------------
    def evaluation_loop(self, *args, **kwargs):
        self._evaluation_batch_index = 0
        return super().evaluation_loop(*args, **kwargs)

    @contextlib.contextmanager
    def evaluation_batch(self, inputs):
        """Yield ``inputs`` with their targets drawn for the next evaluation batch, under that batch's seeds.
        Subclasses that replace ``prediction_step`` wrap their own body in it."""
        index = self._evaluation_batch_index
        self._evaluation_batch_index += 1
        inputs = self._with_training_targets(inputs, self._seed("evaluation targets", index))
        with self._seeded_randomness(self._seed("evaluation step", index)):
            yield inputs

    def prediction_step(self, model, inputs, *args, **kwargs):
        with self.evaluation_batch(inputs) as drawn:
            return super().prediction_step(model, drawn, *args, **kwargs)
