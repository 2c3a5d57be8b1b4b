"""Pieces every compact-bert trainer shares: loss-term logging, the loss plot, frozen teachers, datasets."""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from transformers import Trainer, TrainerCallback

from .data import CorpusArguments, build_block_dataset, bundled_corpus_files, check_model_compatibility, load_text_corpus

__all__ = [
    "DistillationTrainer",
    "LossPlotCallback",
    "LossTermsMixin",
    "freeze_teacher",
    "masked_token_accuracy",
    "prepare_block_datasets",
    "preprocess_logits_for_accuracy",
    "routing_statistics",
    "with_balance_loss",
]

logger = logging.getLogger(__name__)


def freeze_teacher(teacher: torch.nn.Module) -> torch.nn.Module:
    """Explicitly frozen: no gradients, eval mode (no dropout); trainers also call it under ``no_grad``."""
    teacher.requires_grad_(False)
    return teacher.eval()


class LossTermsMixin:
    """Collects named loss terms in ``compute_loss`` and logs their means with the Trainer's own logs."""

    def _record_terms(self, terms: dict[str, torch.Tensor | float], prefix: str) -> None:
        if not hasattr(self, "_loss_terms"):
            self._loss_terms = {"train": defaultdict(list), "eval": defaultdict(list)}
        for name, value in terms.items():
            self._loss_terms[prefix][name].append(float(value.detach()) if torch.is_tensor(value) else float(value))

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        terms = getattr(self, "_loss_terms", None)
        if terms is not None:
            prefix = "eval" if any(key.startswith("eval_") for key in logs) else "train"
            for name, values in terms[prefix].items():
                if values:
                    logs[f"eval_{name}" if prefix == "eval" else name] = sum(values) / len(values)
            terms[prefix].clear()
        super().log(logs, *args, **kwargs)


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
        train = train.take(corpus.max_train_blocks) if corpus.streaming else train.select(
            range(min(corpus.max_train_blocks, len(train)))
        )
    if corpus.max_eval_blocks is not None:
        eval_blocks = eval_blocks.select(range(min(corpus.max_eval_blocks, len(eval_blocks))))
    if not corpus.streaming and len(train) == 0:
        raise ValueError(f"The corpus yields no block of {corpus.block_size} tokens; give it more text.")
    return train, eval_blocks


class DistillationTrainer(LossTermsMixin, Trainer):
    """Base of every compact-bert distillation trainer: holds a frozen teacher on the training device,
    logs named loss terms and writes the loss plot. Subclasses check compatibility, then call this."""

    def __init__(self, model, teacher, args, **kwargs):
        self.teacher = freeze_teacher(teacher)
        super().__init__(model=model, args=args, **kwargs)
        self.teacher.to(self.args.device)
        self.add_callback(LossPlotCallback())


def routing_statistics(expert_load: torch.Tensor | None, dropped: torch.Tensor | None) -> dict[str, float]:
    """Per MoE block: max/min share of real tokens routed to one expert, and the dropped fraction."""
    if expert_load is None:
        return {}
    statistics = {}
    for block, load in enumerate(expert_load):
        statistics[f"block{block}_max_expert_share"] = float(load.max())
        statistics[f"block{block}_min_expert_share"] = float(load.min())
        statistics[f"block{block}_dropped_fraction"] = float(dropped[block])
    return statistics


def with_balance_loss(loss: torch.Tensor, outputs, terms: dict) -> torch.Tensor:
    """Add an MoE student's balance loss (already weighted by its config) and record it with the routing
    statistics; dense students pass through unchanged."""
    if outputs.aux_loss is None:
        return loss
    terms["balance_loss"] = outputs.aux_loss
    terms.update(routing_statistics(outputs.expert_load, outputs.dropped_token_fraction))
    return loss + outputs.aux_loss
