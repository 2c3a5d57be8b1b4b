"""What the pre-training and distillation trainers add to ``training.trainer.CompactBertTrainer``: their two bases,
the frozen teacher, the loss plot, the MLM accuracy metric and the block datasets."""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from accelerate.utils import model_has_dtensor
from transformers import TrainerCallback

from ..training.fsdp import shard_frozen_teacher
from ..training.loss_guard import LossGuardCallback
from ..training.precision_checks import check_precision_supported
from ..training.routing_keys import routing_statistics
from ..training.run_errors import RunSettingsError
from ..training.trainer import CompactBertTrainer
from .data import (
    CorpusArguments,
    build_block_dataset,
    bundled_corpus_files,
    check_model_compatibility,
    load_text_corpus,
)

__all__ = [
    "DistillationTrainer",
    "LossPlotCallback",
    "PretrainingTrainer",
    "freeze_teacher",
    "masked_token_accuracy",
    "prepare_block_datasets",
    "prepare_frozen_teacher",
    "preprocess_logits_for_accuracy",
    "routing_statistics",
    "with_balance_loss",
]

logger = logging.getLogger(__name__)


def freeze_teacher(teacher: torch.nn.Module) -> torch.nn.Module:
    """Explicitly frozen: no gradients, eval mode (no dropout); trainers also call it under ``no_grad``."""
    teacher.requires_grad_(False)
    return teacher.eval()


def prepare_frozen_teacher(teacher: torch.nn.Module, accelerator) -> torch.nn.Module:
    """Freeze ``teacher`` and hand it to the Trainer's accelerator in evaluation mode: placed on the
    accelerator's device, with the run's mixed-precision autocast and ``torch.compile`` settings, and never
    wrapped for gradient synchronisation.

    Placement is asked for explicitly because Accelerate skips it under FSDP (it leaves placement to the
    sharding wrapper, which evaluation mode does not apply); a teacher already distributed by transformers
    (DTensor parameters, a ``device_map``) keeps its placement. Accelerate 1.15's evaluation mode does not
    shard; under FSDP2 the teacher is sharded here instead (``training.fsdp.shard_frozen_teacher``), under FSDP1 /
    DeepSpeed ZeRO-3 every process holds the whole (frozen) teacher.
    """
    freeze_teacher(teacher)
    if accelerator.is_fsdp2 and not model_has_dtensor(teacher):
        return shard_frozen_teacher(teacher, accelerator)
    prepared = accelerator.prepare_model(
        teacher, device_placement=not model_has_dtensor(teacher), evaluation_mode=True
    )
    return freeze_teacher(prepared)


class LossPlotCallback(TrainerCallback):
    """Writes ``loss_terms.png`` (every logged ``*loss*`` value against the step) into the output folder."""

    def on_train_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        series: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for entry in state.log_history:
            for key, value in entry.items():
                if "loss" in key and isinstance(value, (int, float)) and "step" in entry:
                    series[key].append((entry["step"], float(value)))
        if not series:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(8, 5))
        for key, points in sorted(series.items()):
            steps, values = zip(*points)
            axis.plot(steps, values, label=key, marker="." if len(points) < 50 else None)
        axis.set_xlabel("optimizer step")
        axis.set_ylabel("loss")
        axis.set_yscale("log" if all(value > 0 for points in series.values() for _, value in points) else "linear")
        axis.legend(fontsize="small")
        axis.set_title("Loss terms")
        figure.tight_layout()
        path = Path(args.output_dir) / "loss_terms.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=100)
        plt.close(figure)
        logger.info("Loss plot written to %s", path)


def preprocess_logits_for_accuracy(logits, labels):
    """Keep only the arg-max token of the MLM logits, so evaluation does not hold [tokens, vocab] arrays."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(dim=-1)


def masked_token_accuracy(eval_prediction) -> dict[str, float]:
    """Fraction of masked tokens (labels != -100) whose arg-max prediction is the original token."""
    predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
    if isinstance(predictions, tuple):
        predictions = predictions[0]
    if isinstance(labels, tuple):
        labels = labels[0]
    selected = labels != -100
    return {"masked_token_accuracy": float(np.mean(predictions[selected] == labels[selected]))}


def prepare_block_datasets(corpus: CorpusArguments, tokenizer, config, with_pairs: bool):
    """Train and held-out block datasets for ``config``'s model, after the up-front compatibility checks."""
    check_model_compatibility(config, tokenizer, corpus.block_size)
    train_text = load_text_corpus(
        corpus.corpus, corpus.text_column, corpus.streaming, corpus.dataset_name, corpus.dataset_config_name
    )
    train = build_block_dataset(train_text, tokenizer, corpus.block_size, with_pairs)
    eval_sources = corpus.eval_corpus or [str(path) for path in bundled_corpus_files("heldout")]
    eval_blocks = build_block_dataset(load_text_corpus(eval_sources), tokenizer, corpus.block_size, with_pairs)
    if corpus.max_train_blocks is not None:
        train = (
            train.take(corpus.max_train_blocks)
            if corpus.streaming
            else train.select(range(min(corpus.max_train_blocks, len(train))))
        )
    if corpus.max_eval_blocks is not None:
        eval_blocks = eval_blocks.select(range(min(corpus.max_eval_blocks, len(eval_blocks))))
    if len(eval_blocks) == 0:
        raise RunSettingsError(
            f"The held-out corpus ({', '.join(eval_sources) if corpus.eval_corpus else 'the bundled held-out slice'}) "
            f"yields no block of {corpus.block_size} tokens, so the run could not be evaluated; give --eval_corpus "
            "more text or a smaller --block_size."
        )
    if (next(iter(train), None) is None) if corpus.streaming else len(train) == 0:
        raise RunSettingsError(f"The corpus yields no block of {corpus.block_size} tokens; give it more text.")
    return train, eval_blocks


class PretrainingTrainer(CompactBertTrainer):
    """The base trainer for models that compute their own MLM (+ NSP) loss, masks and dropout drawn from the step."""

    training_unit = "blocks"
    draws_randomness_from_step = True


class DistillationTrainer(CompactBertTrainer):
    """Base of every compact-bert distillation trainer: holds a frozen teacher, logs named loss terms, writes the
    loss plot, stops a diverged run (``LossGuardCallback``), and draws masks, dropout and loss sampling from the
    step (so a resumed run continues the same run). Subclasses check compatibility, then call this.

    The teacher is frozen here and handed to the Trainer's accelerator (device, mixed-precision autocast,
    ``torch.compile``) the first time ``self.teacher`` is read, which is in the first ``compute_loss``: by then the
    Trainer has prepared the student, whether for training or for an evaluation before training (which it does only
    while the accelerator has prepared no model)."""

    training_unit = "blocks"
    draws_randomness_from_step = True

    def __init__(self, model, teacher, args, **kwargs):
        check_precision_supported(args, model=model, teacher=teacher)
        super().__init__(model=model, args=args, **kwargs)
        # compute_loss returns a per-batch mean that does not use `num_items_in_batch`: both transformers lines
        # then divide it by the gradient-accumulation steps themselves.
        self.model_accepts_loss_kwargs = False
        self._frozen_teacher = freeze_teacher(teacher)
        self._prepared_teacher = None
        self.add_callback(LossPlotCallback())
        self.add_callback(LossGuardCallback())

    @property
    def teacher(self) -> torch.nn.Module:
        if self._prepared_teacher is None:
            self._prepared_teacher = prepare_frozen_teacher(self._frozen_teacher, self.accelerator)
        return self._prepared_teacher


def with_balance_loss(loss: torch.Tensor, outputs, terms: dict) -> torch.Tensor:
    """Add an MoE student's balance loss (already weighted by its config) and record it with the routing
    statistics; dense students pass through unchanged."""
    if outputs.get("aux_loss") is None:
        return loss
    terms["balance_loss"] = outputs.aux_loss
    terms.update(routing_statistics(outputs.expert_load, outputs.dropped_token_fraction))
    return loss + outputs.aux_loss
