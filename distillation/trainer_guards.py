"""Guards every compact-bert trainer shares so that a run which cannot do its job says so, instead of
reporting success: training that would take no optimizer step, evaluation that would silently skip blocks,
and model folders that cannot be written because the disk is full."""

from __future__ import annotations

from .run_errors import RunSettingsError
from .write_errors import explain_write_errors

__all__ = [
    "EvaluationKeepsEveryExampleMixin",
    "RunGuardsMixin",
    "TrainingMustStepMixin",
    "WriteErrorsExplainedMixin",
    "check_training_steps",
]


def check_training_steps(num_examples: int, args, unit: str = "examples") -> None:
    """Fail before training when the training data would yield no optimizer step.

    Both transformers lines take one optimizer step per ``gradient_accumulation_steps`` batches and one for a
    remainder, so an epoch steps as soon as each process gets one batch. It gets none when the data is empty,
    or when ``dataloader_drop_last`` (the default of ``distill tcd``) drops the only, incomplete batch: fewer
    examples than ``per_device_train_batch_size`` x processes (Accelerate shards whole batches over processes).
    """
    batch = args.train_batch_size
    accelerator_config = getattr(args, "accelerator_config", None)
    processes = 1 if getattr(accelerator_config, "split_batches", False) else args.world_size
    accumulation = args.gradient_accumulation_steps
    per_step = (f"--per_device_train_batch_size {args.per_device_train_batch_size} x {processes} process(es) x "
                f"--gradient_accumulation_steps {accumulation} = {batch * processes * accumulation} {unit} per "
                "optimizer step")  # fmt: skip
    if num_examples == 0:
        raise RunSettingsError(f"The training set holds no {unit}: training would take 0 optimizer steps; give it data.")
    if args.dataloader_drop_last and num_examples < batch * processes:
        largest = num_examples // processes
        remedy = (f"lower --per_device_train_batch_size to {largest} or less, or " if largest else "") + (
            f"give more training data (at least {batch * processes} {unit})"
        )
        raise RunSettingsError(
            f"The training set holds {num_examples} {unit} but one batch takes {batch * processes} "
            f"(--per_device_train_batch_size {args.per_device_train_batch_size} x {processes} process(es)), and "
            "--dataloader_drop_last true drops the incomplete batch: training "
            f"would take 0 optimizer steps ({per_step}). {remedy[0].upper()}{remedy[1:]}."
        )


class TrainingMustStepMixin:
    """``train`` refuses to start a run that would take no optimizer step: it would save an untrained model and
    report success. (Data without a length, a streamed corpus, cannot be counted here; an empty one is refused
    where it is built, and a short one still yields a partial batch.)"""

    training_unit = "examples"

    def train(self, *args, **kwargs):
        try:
            num_examples = len(self.train_dataset)
        except TypeError:  # no training set, or one without a length (a streamed corpus)
            num_examples = None
        if num_examples is not None:
            check_training_steps(num_examples, self.args, self.training_unit)
        return super().train(*args, **kwargs)


class EvaluationKeepsEveryExampleMixin:
    """Evaluation reads every example, also the last, incomplete batch.

    Both transformers lines apply ``dataloader_drop_last`` to the evaluation dataloader too; a training-time
    setting (``distill tcd`` needs full training batches) would then drop held-out blocks, and with fewer
    blocks than one batch leave no evaluation metric at all. ``get_eval_dataloader`` and ``get_test_dataloader``
    are the documented override points; the flag is read while the dataloader is built, so it is lifted only
    for that call."""

    def _without_drop_last(self, build, *args):
        keep = self.args.dataloader_drop_last
        self.args.dataloader_drop_last = False
        try:
            return build(*args)
        finally:
            self.args.dataloader_drop_last = keep

    def get_eval_dataloader(self, eval_dataset=None):
        return self._without_drop_last(super().get_eval_dataloader, eval_dataset)

    def get_test_dataloader(self, test_dataset):
        return self._without_drop_last(super().get_test_dataloader, test_dataset)


class WriteErrorsExplainedMixin:
    """A full disk while checkpoints (during ``train``) or the model (``save_model``) are written is reported
    with the folder and the cause (see ``write_errors``)."""

    def train(self, *args, **kwargs):
        with explain_write_errors(self.args.output_dir, "Writing checkpoints to"):
            return super().train(*args, **kwargs)

    def save_model(self, output_dir=None, _internal_call=False):
        with explain_write_errors(output_dir or self.args.output_dir, "Saving the model to"):
            return super().save_model(output_dir, _internal_call)


class RunGuardsMixin(TrainingMustStepMixin, EvaluationKeepsEveryExampleMixin, WriteErrorsExplainedMixin):
    """All of the guards above; put it before ``Trainer`` in a trainer's bases."""
