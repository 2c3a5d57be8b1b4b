"""Pre-training (``compact-bert pretrain``): any preset (an IB-BERT teacher first) with MLM (+ NSP) on a corpus."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import transformers

from ..distillation.data import CorpusArguments, PretrainingCollator, default_tokenizer
from ..distillation.trainer_utils import (
    LossPlotCallback,
    PretrainingTrainer,
    masked_token_accuracy,
    prepare_block_datasets,
    preprocess_logits_for_accuracy,
)
from ..training.loss_guard import LossGuardCallback
from ..training.output_folders import check_run_output
from ..training.precision_checks import check_precision_supported
from ..training.training_arguments import CompactBertTrainingArguments
from .model_building import build_from_preset, load_pretrained
from .run_report import train_and_report

__all__ = ["PretrainingModelArguments", "pretrain"]


@dataclass
class PretrainingModelArguments:
    preset: str = field(default="ib-bert-large", metadata={"help": "Preset to build (see `compact-bert presets`)."})
    model_overrides: str = field(
        default="{}",
        metadata={"help": "JSON object of config fields replacing the preset's, e.g. '{\"num_hidden_layers\": 4}'."},
    )
    init_from: str | None = field(
        default=None, metadata={"help": "Continue from this model folder instead of a fresh preset."}
    )
    next_sentence_prediction: bool | None = field(
        default=None,
        metadata={"help": "Add the NSP objective (default: yes when the family has a pre-training head)."},
    )


def pretrain(
    model_args: PretrainingModelArguments, corpus: CorpusArguments, training_args: CompactBertTrainingArguments
) -> dict:
    """The job (module docstring) on parsed arguments; the run summary."""
    check_run_output(training_args, model_args, corpus)
    if model_args.init_from:
        model = load_pretrained(
            model_args.init_from,
            (transformers.AutoModelForPreTraining, transformers.AutoModelForMaskedLM),
            "init_from",
        )
    else:
        try:
            model = build_from_preset(
                model_args.preset, model_args.model_overrides, "model_overrides", transformers.AutoModelForPreTraining
            )
        except ValueError:
            model = build_from_preset(
                model_args.preset, model_args.model_overrides, "model_overrides", transformers.AutoModelForMaskedLM
            )
    check_precision_supported(training_args, model=model)
    has_nsp_head = hasattr(getattr(model, "cls", None), "seq_relationship")
    with_pairs = has_nsp_head if model_args.next_sentence_prediction is None else model_args.next_sentence_prediction
    if with_pairs and not has_nsp_head:
        raise SystemExit(f"--next_sentence_prediction: {type(model).__name__} has no next-sentence head.")
    tokenizer = default_tokenizer()
    train, held_out = prepare_block_datasets(corpus, tokenizer, model.config, with_pairs)
    trainer = PretrainingTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=held_out,
        processing_class=tokenizer,
        data_collator=PretrainingCollator(tokenizer, corpus.mlm_probability, next_sentence_prediction=with_pairs),
        compute_metrics=masked_token_accuracy,
        preprocess_logits_for_metrics=preprocess_logits_for_accuracy,
        callbacks=[LossPlotCallback(), LossGuardCallback()],
    )
    return train_and_report(
        trainer, tokenizer, training_args, {"model_type": model.config.model_type, "data": dataclasses.asdict(corpus)}
    )
