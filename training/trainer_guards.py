"""The check behind ``CompactBertTrainer.train``'s first guard: a run that would take no optimizer step says so
before it starts, instead of saving an untrained model and reporting success. (Data without a length, a streamed
corpus, cannot be counted; an empty one is refused where it is built, and a short one still yields a partial
batch.)"""

from __future__ import annotations

from .run_errors import RunSettingsError

__all__ = ["check_training_steps"]


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
    per_step = (
        f"--per_device_train_batch_size {args.per_device_train_batch_size} x {processes} process(es) x "
        f"--gradient_accumulation_steps {accumulation} = {batch * processes * accumulation} {unit} per "
        "optimizer step"
    )
    if num_examples == 0:
        raise RunSettingsError(
            f"The training set holds no {unit}: training would take 0 optimizer steps; give it data."
        )
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
