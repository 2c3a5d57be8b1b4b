"""The fine-tuning Trainer and its metrics.

An MoE head's ``loss`` is the task loss plus its weighted balance loss (``aux_loss``): that is what is optimized
and what the Trainer reports as ``loss`` / ``eval_loss``. Because a λ_B = 1000 balance term can dominate that
number (paper 003's MoE-BERT), the trainer also logs the two parts separately — ``task_loss`` and
``balance_loss`` (``eval_task_loss``, ``eval_balance_loss`` in evaluation) — with the routing statistics.
"""

from __future__ import annotations

import numpy as np

from ..training.loss_guard import LossGuardCallback
from ..training.precision_checks import check_precision_supported
from ..training.routing_keys import routing_statistics, with_evaluation_router_stats
from ..training.trainer import CompactBertTrainer

__all__ = [
    "FinetuneTrainer",
    "build_compute_metrics",
    "check_eval_keeps_every_token",
    "split_loss_terms",
]


def split_loss_terms(loss, outputs) -> dict:
    """``task_loss`` (= loss − aux_loss) and, for MoE outputs, ``balance_loss`` and the routing statistics."""
    aux_loss = outputs.get("aux_loss") if hasattr(outputs, "get") else getattr(outputs, "aux_loss", None)
    if aux_loss is None:
        return {"task_loss": loss}
    terms = {"task_loss": loss - aux_loss, "balance_loss": aux_loss}
    terms.update(routing_statistics(outputs.get("expert_load"), outputs.get("dropped_token_fraction")))
    return terms


def check_eval_keeps_every_token(config) -> None:
    """Evaluation must not drop tokens: a dropped token's prediction would depend on the rest of its batch.
    ``eval_capacity_factor=None`` (the default of every MoE config) gives every token its expert."""
    if getattr(config, "eval_capacity_factor", None) is not None:
        raise ValueError(
            f"The model's `eval_capacity_factor` is {config.eval_capacity_factor}: evaluation would drop tokens and "
            "depend on the batch. Set `config.eval_capacity_factor = None` (the default)."
        )


class FinetuneTrainer(CompactBertTrainer):
    """The base trainer, logging the task loss and the balance loss separately (train and eval) with the routing
    statistics of MoE models. The optimized and
    reported ``loss`` is unchanged: the model's own. Refuses ``--fp16`` for NoNorm models and stops a diverged
    run (``LossGuardCallback``)."""

    def __init__(self, model, args, **kwargs):
        check_eval_keeps_every_token(model.config)
        check_precision_supported(args, model=model)
        super().__init__(model=model, args=args, **kwargs)
        self.add_callback(LossGuardCallback())

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = with_evaluation_router_stats(model, inputs)
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        self.record_loss_terms(split_loss_terms(loss, outputs), "train" if model.training else "eval")
        return (loss, outputs) if return_outputs else loss


def _first(array):
    return array[0] if isinstance(array, (tuple, list)) else array


def build_compute_metrics(task_type: str, label_names: list[str] | None, glue_task: str | None = None):
    """A ``compute_metrics`` for the Trainer from compact-bert's offline ``evaluate`` metrics: the GLUE task's
    metric (accuracy for other classification data, Pearson/Spearman for regression) or CoNLL entity-level
    precision / recall / F1 (positions labelled -100 — sub-tokens after the first, special tokens — removed)."""
    from ..evaluation import load_metric

    if task_type == "ner":
        metric = load_metric("conll_ner")

        def compute_ner(eval_prediction):
            predictions = np.argmax(_first(eval_prediction.predictions), axis=-1)
            labels = _first(eval_prediction.label_ids)
            references, predicted = [], []
            for sentence_predictions, sentence_labels in zip(predictions, labels):
                kept = sentence_labels != -100
                references.append([label_names[index] for index in sentence_labels[kept]])
                predicted.append([label_names[index] for index in sentence_predictions[kept]])
            scores = metric.compute(predictions=predicted, references=references)
            flat = {key: value for key, value in scores.items() if not isinstance(value, dict)}
            flat.update({f"{entity}_f1": value["f1"] for entity, value in scores.items() if isinstance(value, dict)})
            return flat

        return compute_ner
    config_name = glue_task or ("stsb" if task_type == "regression" else "sst2")
    metric = load_metric("glue", config_name)

    def compute_sequence(eval_prediction):
        logits = _first(eval_prediction.predictions)
        labels = _first(eval_prediction.label_ids)
        predictions = logits.squeeze(-1) if task_type == "regression" else np.argmax(logits, axis=-1)
        scores = metric.compute(predictions=predictions, references=labels)
        if task_type != "regression" and len(predictions):
            # The share of the most frequent predicted class: 1.0 flags a classifier that answers one class.
            scores["majority_prediction_share"] = float(np.bincount(predictions).max() / len(predictions))
        return scores

    return compute_sequence


def metric_names(task_type: str, label_names: list[str] | None, glue_task: str | None = None) -> list[str]:
    """The keys ``build_compute_metrics`` returns for this task (read off one computation on two made-up examples),
    and ``loss``: what ``--metric_for_best_model`` may name."""
    import warnings

    from transformers import EvalPrediction

    compute = build_compute_metrics(task_type, label_names, glue_task)
    if task_type == "ner":
        logits, labels = np.zeros((1, 2, len(label_names))), np.array([[0, min(1, len(label_names) - 1)]])
    elif task_type == "regression":
        logits, labels = np.array([[0.0], [1.0]]), np.array([0.0, 1.0])
    else:
        logits, labels = np.eye(2, max(2, len(label_names or ()))), np.array([0, 1])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        keys = compute(EvalPrediction(predictions=logits, label_ids=labels))
    return sorted(["loss", *keys])


def check_metric_name(name: str, task_type: str, label_names: list[str] | None, glue_task: str | None = None) -> None:
    """``--metric_for_best_model`` must name a metric this task's evaluation reports (with or without ``eval_``),
    checked before training instead of failing at the first evaluation."""
    from ..training.run_errors import RunSettingsError

    valid = metric_names(task_type, label_names, glue_task)
    if name.removeprefix("eval_") not in valid:
        raise RunSettingsError(
            f"--metric_for_best_model {name!r} is not a metric of this {task_type} task's evaluation; "
            f"valid: {', '.join(valid)}."
        )
