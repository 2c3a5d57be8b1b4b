"""A saved classifier or tagger scored on a dev set exactly as ``compact-bert finetune`` scores it after training.

The main job uses it for a teacher that is already fine-tuned for the task (it is scored, not trained again), and
the recipe studies in ``examples/`` for folders trained earlier.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["evaluate_folder"]


def evaluate_folder(folder: str | Path, data_args, batch_size: int = 64) -> dict:
    """``folder``'s ``eval_*`` metrics on ``data_args``' validation split (a ``FinetuneDataArguments``: task, files,
    sequence length), with the same tokenization, collation and metrics as ``finetune``'s evaluation."""
    import transformers
    from transformers import AutoTokenizer, DataCollatorForTokenClassification, DataCollatorWithPadding

    from ..training.compat import FROM_PRETRAINED_KWARGS
    from .data import load_finetuning_data, tokenize_sequence_dataset, tokenize_token_dataset
    from .finetune_trainer import build_compute_metrics

    splits = load_finetuning_data(data_args)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    max_length = data_args.resolved_max_seq_length()
    if splits.task_type == "ner":
        model_class = transformers.AutoModelForTokenClassification
        dev = tokenize_token_dataset(splits.validation, tokenizer, max_length)
        collator = DataCollatorForTokenClassification(tokenizer)
    else:
        model_class = transformers.AutoModelForSequenceClassification
        dev = tokenize_sequence_dataset(splits.validation, tokenizer, splits.text_columns, max_length)
        collator = DataCollatorWithPadding(tokenizer)
    model = model_class.from_pretrained(folder, **FROM_PRETRAINED_KWARGS)
    glue = data_args.task_name if data_args.glue_task else None
    with tempfile.TemporaryDirectory() as scratch:
        trainer = transformers.Trainer(
            model=model,
            args=transformers.TrainingArguments(
                output_dir=scratch, per_device_eval_batch_size=batch_size, report_to="none", disable_tqdm=True
            ),
            eval_dataset=dev,
            data_collator=collator,
            compute_metrics=build_compute_metrics(splits.task_type, splits.label_names, glue),
        )
        return trainer.evaluate()
