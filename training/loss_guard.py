"""Stop a training run that diverged, before its state is saved.

A learning rate a few orders of magnitude too high does not crash: the loss climbs to 1e10 or the weights turn
NaN, and the run goes on to save a useless model as if it had succeeded. transformers' default
``logging_nan_inf_filter`` even hides a NaN step loss from the logged ``loss``. Every compact-bert trainer
installs ``LossGuardCallback``, which checks each training log (and forces one at the first step, as the reference,
and before every checkpoint save and the final model's, so that nothing is saved from a state that was not checked,
whatever ``--logging_steps`` is) and raises ``TrainingDivergedError`` when

- the logged loss is NaN or infinite,
- the logged loss exceeds ``explosion_factor`` (``DEFAULT_LOSS_EXPLOSION_FACTOR`` = 100) times the first logged
  loss (of the current stage, for MobileBERT's staged strategies, whose objectives differ in scale), or
- a weight of the model is NaN or infinite (one reduction per tensor per log).

The error names the step, the loss, the learning rate and the last checkpoint, which is kept; the diverged
state is neither saved as a checkpoint nor as the final model. The CLI turns it into a non-zero exit.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

__all__ = ["DEFAULT_LOSS_EXPLOSION_FACTOR", "LossGuardCallback", "TrainingDivergedError"]

# How many times the first logged loss a logged loss may reach before the run counts as diverged. Loss curves
# of healthy runs fall, or rise by a small factor at a distillation stage change; 100× is far outside both.
DEFAULT_LOSS_EXPLOSION_FACTOR = 100.0


class TrainingDivergedError(RuntimeError):
    """Training produced a non-finite or exploding loss, or non-finite weights."""


class LossGuardCallback(TrainerCallback):
    """See the module docstring. Use another ``explosion_factor`` with
    ``trainer.remove_callback(LossGuardCallback); trainer.add_callback(LossGuardCallback(explosion_factor=...))``."""

    def __init__(self, explosion_factor: float = DEFAULT_LOSS_EXPLOSION_FACTOR):
        if not explosion_factor > 1:
            raise ValueError(f"`explosion_factor` must be > 1, got {explosion_factor}.")
        self.explosion_factor = explosion_factor
        self.reference: tuple[int, float] | None = None  # (step, loss) of the first logged loss
        self.stage = None  # MobileBERT's staged strategies log a `stage`: each stage has its own loss scale

    def on_train_begin(self, args, state, control, **kwargs):
        # A resumed run measures against the first loss of the original run, as its log history holds it.
        self.reference = next(
            ((entry["step"], entry["loss"]) for entry in state.log_history if _finite_number(entry.get("loss"))), None
        )

    def on_step_end(self, args, state, control, **kwargs):
        # The loss of the steps since the last log is only known when it is logged: log before every save,
        # including the final model's (the last step, or a stop), and log the first step as the reference a later
        # loss is compared with, so that the check does not depend on --logging_steps.
        last = control.should_training_stop or (state.max_steps > 0 and state.global_step >= state.max_steps)
        if control.should_save or last or (self.reference is None and state.global_step == 1):
            control.should_log = True

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if not logs or "loss" not in logs or not isinstance(logs["loss"], (int, float)):
            return  # evaluation and end-of-training summaries
        loss = float(logs["loss"])
        if logs.get("stage") != self.stage:  # a new objective (layer-wise -> pre-training distillation)
            self.stage, self.reference = logs.get("stage"), None
        problem = None
        if not math.isfinite(loss):
            problem = f"the loss is {loss}"
        elif self.reference is None:
            self.reference = (state.global_step, loss)
        elif loss > self.explosion_factor * max(self.reference[1], 1e-8):
            problem = (
                f"the loss {loss:.4g} is {loss / max(self.reference[1], 1e-8):.3g} times the first logged loss "
                f"({self.reference[1]:.4g} at step {self.reference[0]}; the limit is {self.explosion_factor:g} times)"
            )
        if problem is None and model is not None:
            broken = _non_finite_parameter(model)
            if broken is not None:
                problem = f"weight {broken} holds NaN or infinite values (logged loss {loss:.4g})"
        if problem is None:
            return
        learning_rate = logs.get("learning_rate")
        rate = f"{learning_rate:.3g}" if isinstance(learning_rate, (int, float)) else "unknown"
        raise TrainingDivergedError(
            f"Training diverged at step {state.global_step}: {problem}; learning rate {rate}. Stopped before saving "
            f"this state: {_kept(args.output_dir)}, and no final model was written. Lower --learning_rate, add "
            "warmup (--warmup_steps) or gradient clipping (--max_grad_norm); with --fp16, prefer --bf16."
        )


def _finite_number(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _non_finite_parameter(model) -> str | None:
    for name, parameter in model.named_parameters():
        if (
            parameter.is_floating_point()
            and parameter.device.type != "meta"
            and not bool(torch.isfinite(parameter).all())
        ):
            return name
    return None


def _kept(output_dir) -> str:
    last = get_last_checkpoint(output_dir) if output_dir and Path(output_dir).is_dir() else None
    return f"the last checkpoint, {last}, is kept" if last else f"no checkpoint had been saved in {output_dir}"
