"""``CompactBertTrainer``: the one base of every compact-bert trainer (pre-training, the three distillation
methods, embeddings, fine-tuning and task distillation).

It is transformers' ``Trainer`` with what every run of this project needs, each through a documented override
point of ``Trainer`` rather than a stack of mixins:

- **Run guards.** ``train`` refuses a run that would take no optimizer step (it would save an untrained model and
  report success); evaluation reads every example, also the last incomplete batch, whatever
  ``dataloader_drop_last`` says for training; a full disk while checkpoints or the model are written is reported
  with the folder and the cause (``write_errors``).
- **Named loss terms.** ``record_loss_terms`` in ``compute_loss`` collects terms on the device (no host
  synchronisation per step); each log adds their means over every process beside the Trainer's own ``loss``.
- **A concise console.** One line per log (``console_log``) instead of transformers' dictionaries; ``--verbose``
  keeps them.
- **Randomness from the step** (``draws_randomness_from_step``, for the methods that mask or sample): MLM masks,
  dropout and any sampling in a loss (``step_generator``) depend on the run's seed, the optimizer step, the
  micro-batch and the process, never on the global random state's history, so a resumed run continues the same run
  (``step_randomness``).
- **FSDP2** (``fsdp``): ``--fsdp`` also shards on CPU processes (gloo), where Accelerate would silently fall back to
  DDP; models whose MLM bias is aliased are sharded layer by layer here; a resumed run loads the optimizer state of
  parameters the loss never reached as the uninterrupted run had it (none); the finished model is saved whole
  whatever the checkpoints' state-dict type.
"""

from __future__ import annotations

import contextlib

import torch
from accelerate.utils import gather_object
from transformers import Trainer
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from .console_log import ConcisePrinterCallback, ConciseProgressCallback, verbose
from .fsdp import (
    enable_fsdp_on_cpu,
    fsdp_plugin_arguments,
    has_aliased_parameters,
    parameters_without_saved_state,
    save_as_unsharded_class,
    saves_sharded_state_dict,
    shard_model,
)
from .step_randomness import draw_training_targets, run_seed, seeded_generator, seeded_global_randomness, step_seed
from .trainer_guards import check_training_steps
from .write_errors import explain_write_errors

__all__ = ["CompactBertTrainer"]


class CompactBertTrainer(Trainer):
    """transformers' ``Trainer`` with compact-bert's run guards, loss terms, console and step-drawn randomness."""

    # What one training example is called in messages ("blocks" for corpora, "examples" for labelled data).
    training_unit = "examples"
    # Whether masks, dropout and loss sampling are drawn from the step (see the module docstring).
    draws_randomness_from_step = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.is_fsdp_enabled and self.accelerator.is_fsdp2 and has_aliased_parameters(self.model):
            # accelerate's grouping would split an aliased MLM bias over two groups (training/fsdp.py); ours keeps
            # it in the root group. accelerate then leaves the FSDP module as it is (fsdp_utils.py:763-767), and must
            # not look the layer classes up by their (now FSDP<Name>) names (dataclasses.py:2095).
            self.accelerator.state.fsdp_plugin.auto_wrap_policy = None
            shard_model(self.model, self.accelerator, self.accelerator.state.fsdp_plugin.reshard_after_forward)
        self._loss_terms: dict[str, dict[str, tuple]] = {"train": {}, "eval": {}}
        self._current_step_seed: int | None = None
        self._micro_batch_step: int | None = None
        self._micro_batch_index = 0
        self._evaluation_batch_index = 0
        self._generators_outside_a_step: dict[str, torch.Generator] = {}
        if not verbose():
            for default, concise in (
                (PrinterCallback, ConcisePrinterCallback),
                (ProgressCallback, ConciseProgressCallback),
            ):
                if any(type(callback) is default for callback in self.callback_handler.callbacks):
                    self.remove_callback(default)
                    self.add_callback(concise)

    # -- FSDP ------------------------------------------------------------------------------------------
    def create_accelerator_and_postprocess(self):
        """``--fsdp`` on CPU too: Accelerate 1.15 ignores the FSDP plugin there (training/fsdp.py)."""
        try:
            super().create_accelerator_and_postprocess()
        except RuntimeError as error:
            if self.args.fsdp and "no available devices" in str(error):
                raise ValueError(
                    "--fsdp on CPU processes: `sync_module_states` (on by default in transformers 4.57) broadcasts "
                    "rank 0's weights from an accelerator device, and there is none. Add "
                    '"sync_module_states": false to --fsdp_config (every process builds the same weights from the '
                    "seed); see docs/distributed.md."
                ) from error
            raise
        if enable_fsdp_on_cpu(self.accelerator, fsdp_plugin_arguments(self.args)):
            self.is_fsdp_enabled = True

    def _load_optimizer_and_scheduler(self, checkpoint):
        """Parameters with no saved optimizer state (never reached by the loss) are frozen while an FSDP checkpoint's
        optimizer state loads, so they stay without state, as in the uninterrupted run."""
        hidden = parameters_without_saved_state(self.model, checkpoint) if checkpoint and self.is_fsdp_enabled else []
        for parameter in hidden:
            parameter.requires_grad_(False)
        try:
            return super()._load_optimizer_and_scheduler(checkpoint)
        finally:
            for parameter in hidden:
                parameter.requires_grad_(True)

    # -- run guards ------------------------------------------------------------------------------------
    def train(self, *args, **kwargs):
        try:
            num_examples = len(self.train_dataset)
        except TypeError:  # no training set, or one without a length (a streamed corpus): refused where it is built
            num_examples = None
        if num_examples is not None:
            check_training_steps(num_examples, self.args, self.training_unit)
        with explain_write_errors(self.args.output_dir, "Writing checkpoints to"):
            return super().train(*args, **kwargs)

    def save_model(self, output_dir=None, _internal_call=False):
        with explain_write_errors(output_dir or self.args.output_dir, "Saving the model to"):
            fsdp2 = self.is_fsdp_enabled and self.accelerator.is_fsdp2  # FSDP1 gathers only under FULL_STATE_DICT
            if fsdp2:
                save_as_unsharded_class(self.model)  # not as FSDP2's wrapper class, defined in torch
            if not _internal_call and fsdp2 and saves_sharded_state_dict(self.accelerator):
                # Checkpoints keep the shards, but the Trainer would write no model at all: the finished model is
                # gathered (a collective: every process calls this) and saved whole, loadable by from_pretrained.
                state_dict = self.accelerator.get_state_dict(self.model)
                if self.args.should_save:
                    self._save(output_dir, state_dict=state_dict)
                return None
            return super().save_model(output_dir, _internal_call)

    def get_eval_dataloader(self, eval_dataset=None):
        return self._without_drop_last(super().get_eval_dataloader, eval_dataset)

    def get_test_dataloader(self, test_dataset):
        return self._without_drop_last(super().get_test_dataloader, test_dataset)

    def _without_drop_last(self, build, *args):
        """Both transformers lines apply ``dataloader_drop_last`` to evaluation too; a training-time setting
        (``distill tcd`` needs full training batches) would drop held-out blocks, or every one of them. The flag
        is read while the dataloader is built, so it is lifted for that call only."""
        keep = self.args.dataloader_drop_last
        self.args.dataloader_drop_last = False
        try:
            return build(*args)
        finally:
            self.args.dataloader_drop_last = keep

    # -- named loss terms ------------------------------------------------------------------------------
    def record_loss_terms(self, terms: dict[str, torch.Tensor | float], split: str) -> None:
        """Add ``terms`` (name → scalar) to the ``"train"`` or ``"eval"`` sums of the current logging window."""
        recorded = self._loss_terms[split]
        for name, value in terms.items():
            value = (
                value.detach().double() if torch.is_tensor(value) else torch.tensor(float(value), dtype=torch.float64)
            )
            total, count = recorded.get(name, (0.0, 0))
            recorded[name] = (value + total, count + 1)

    def _mean_loss_terms(self, split: str) -> dict[str, float]:
        """Means of the terms recorded since the last log, over every process (like the Trainer's own ``loss``)."""
        recorded = self._loss_terms[split]
        names = sorted(recorded)
        accelerator = self.accelerator
        if accelerator.num_processes > 1:
            # Every process must take part with the same names, also one that recorded a term the others did not.
            names = sorted(set().union(*gather_object([names])))
        if not names:
            return {}
        device = accelerator.device
        sums = [recorded[name][0] if name in recorded else 0.0 for name in names]
        totals = torch.stack([torch.as_tensor(value, dtype=torch.float64).to(device) for value in sums])
        counts = [float(recorded[name][1]) if name in recorded else 0.0 for name in names]
        packed = torch.stack([totals, torch.tensor(counts, dtype=torch.float64, device=device)])
        if accelerator.num_processes > 1:
            packed = accelerator.reduce(packed, reduction="sum")
        recorded.clear()
        return {name: float(total / count) for name, total, count in zip(names, *packed.tolist()) if count > 0}

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        split = "eval" if any(key.startswith("eval_") for key in logs) else "train"
        for name, mean in self._mean_loss_terms(split).items():
            logs[f"eval_{name}" if split == "eval" else name] = mean
        super().log(logs, *args, **kwargs)

    # -- randomness drawn from the step ----------------------------------------------------------------
    def step_generator(self, purpose: str) -> torch.Generator:
        """A CPU generator for ``purpose`` in the current micro-batch (training) or batch (evaluation). Outside a
        step (``compute_loss`` called directly) a generator per purpose, seeded once from ``--seed``, is advanced."""
        if self._current_step_seed is not None:
            return seeded_generator(step_seed(self._current_step_seed, purpose))
        if purpose not in self._generators_outside_a_step:
            self._generators_outside_a_step[purpose] = seeded_generator(run_seed(self.args, purpose, "outside a step"))
        return self._generators_outside_a_step[purpose]

    @contextlib.contextmanager
    def _step_seeded(self, seed: int):
        with seeded_global_randomness(seed):
            self._current_step_seed = seed
            try:
                yield
            finally:
                self._current_step_seed = None

    def get_batch_samples(self, epoch_iterator, num_batches, *args, **kwargs):
        """Masks are drawn here, when the micro-batches of one optimizer step are fetched before any is trained,
        so that the number of masked tokens is known when Trainer counts ``num_items_in_batch``."""
        if not self.draws_randomness_from_step:
            return super().get_batch_samples(epoch_iterator, num_batches, *args, **kwargs)
        step = self.state.global_step

        def with_targets():
            for index, batch in enumerate(epoch_iterator):
                yield draw_training_targets(
                    self.data_collator, batch, run_seed(self.args, "training targets", step, index)
                )

        return super().get_batch_samples(with_targets(), num_batches, *args, **kwargs)

    def training_step(self, model, inputs, *args, **kwargs):
        if not self.draws_randomness_from_step:
            return super().training_step(model, inputs, *args, **kwargs)
        step = self.state.global_step
        self._micro_batch_index = self._micro_batch_index + 1 if self._micro_batch_step == step else 0
        self._micro_batch_step = step
        with self._step_seeded(run_seed(self.args, "training step", step, self._micro_batch_index)):
            return super().training_step(model, inputs, *args, **kwargs)

    def evaluation_loop(self, *args, **kwargs):
        self._evaluation_batch_index = 0
        return super().evaluation_loop(*args, **kwargs)

    @contextlib.contextmanager
    def evaluation_batch(self, inputs):
        """Yield ``inputs`` with their targets drawn for the next evaluation batch, under that batch's seeds.
        Subclasses that replace ``prediction_step`` wrap their own body in it."""
        if not self.draws_randomness_from_step:
            yield inputs
            return
        index = self._evaluation_batch_index
        self._evaluation_batch_index += 1
        inputs = draw_training_targets(self.data_collator, inputs, run_seed(self.args, "evaluation targets", index))
        with self._step_seeded(run_seed(self.args, "evaluation step", index)):
            yield inputs

    def prediction_step(self, model, inputs, *args, **kwargs):
        with self.evaluation_batch(inputs) as drawn:
            return super().prediction_step(model, drawn, *args, **kwargs)
