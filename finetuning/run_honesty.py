"""What a fine-tuning run reports about itself, so that its numbers cannot fool the reader.

- ``ReportingEarlyStopping``: transformers' early stopping, which also says when it stopped and why (the dev metric,
  its best value and how many evaluations passed without improving); the stop goes into the run summary.
- ``reported_checkpoint``: whether the reported dev metrics are those of the final model or of a checkpoint picked
  by that same dev metric (``load_best_model_at_end``) — the latter is optimistic, and says so.
- ``single_class_warning``: a classifier that answers one class for every dev example (a collapsed run whose
  accuracy is the majority class's share) is named as such.
"""

from __future__ import annotations

import logging

from transformers import EarlyStoppingCallback

__all__ = ["ReportingEarlyStopping", "reported_checkpoint", "single_class_warning"]

logger = logging.getLogger(__name__)

# ``eval_majority_prediction_share`` at or above this: every dev example got the same class.
SINGLE_CLASS_SHARE = 0.999


class ReportingEarlyStopping(EarlyStoppingCallback):
    """``EarlyStoppingCallback`` that records and prints the stop: epoch, step, metric, best value, patience."""

    def __init__(self, early_stopping_patience: int = 1, early_stopping_threshold: float = 0.0):
        super().__init__(early_stopping_patience, early_stopping_threshold)
        self.stop: dict | None = None

    def on_evaluate(self, args, state, control, metrics, **kwargs):
        super().on_evaluate(args, state, control, metrics, **kwargs)
        if control.should_training_stop and self.stop is None and state.global_step < state.max_steps:
            metric = args.metric_for_best_model
            self.stop = {
                "epoch": round(float(state.epoch or 0), 2),
                "step": state.global_step,
                "max_steps": state.max_steps,
                "metric": metric,
                "best": state.best_metric,
                "best_checkpoint": state.best_model_checkpoint,
                "evaluations_without_improvement": self.early_stopping_patience_counter,
            }
            print(
                f"Early stopping at epoch {self.stop['epoch']} (step {state.global_step} of {state.max_steps}): "
                f"{metric} has not improved for {self.early_stopping_patience_counter} evaluations; best "
                f"{state.best_metric} ({state.best_model_checkpoint})."
            )


def reported_checkpoint(training_args) -> str:
    """How the reported dev metrics were obtained (the run summary's ``reported_checkpoint``)."""
    if getattr(training_args, "load_best_model_at_end", False):
        return (
            f"best of the run's checkpoints by {training_args.metric_for_best_model} on the same dev set it "
            "reports (selected on that data: optimistic)"
        )
    return "final model (no selection on the dev set)"


def single_class_warning(summary: dict) -> str | None:
    """A one-line warning when the run's reported model predicts one class for every dev example."""
    share = summary.get("eval_majority_prediction_share")
    if share is None or share < SINGLE_CLASS_SHARE:
        return None
    return (
        f"The reported model predicts one class for every dev example (majority share {share}): its "
        f"{summary.get('task_name') or 'dev'} metric is that of a constant answer, not of a trained classifier."
    )
