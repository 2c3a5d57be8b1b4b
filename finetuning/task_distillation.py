"""Task-specific distillation: a fine-tuned teacher teaches the student on the task's own training data.

TinyBERT's second stage (Jiao et al., 2020, §3.2) and DistilBERT's fine-tuning with a teacher: the student's loss
is ``α · L_task + (1 − α) · L_soft + balance loss``, where ``L_soft`` is

- sentence classification: ``T² · KL(softmax(z^tr/T) ‖ softmax(z^st/T))`` per example (Hinton et al., 2015);
- regression: the MSE to the teacher's prediction;
- token classification: the same KL per real (unpadded) token.

The teacher's logits are computed once per training set (in evaluation mode, no dropout) and kept in the on-disk
cache of ``distillation/teacher_cache.py``: every seed, grid point and student of the same data reuses them, and a
run reads bitwise the same targets whether it computed them or not. Evaluation reports the plain task metrics of
the student alone.
"""

from __future__ import annotations

import logging
from pathlib import Path

import datasets
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification, Trainer

from ..distillation.losses import soft_target_loss, token_soft_target_loss
from ..distillation.teacher_cache import (
    cached_teacher_outputs,
    data_fingerprint,
    teacher_fingerprint,
    tokenizer_fingerprint,
)
from ..distillation.trainer_utils import freeze_teacher
from ..training.compat import FROM_PRETRAINED_KWARGS, use_eager_attention
from ..training.routing_keys import with_evaluation_router_stats
from ..training.run_errors import RunSettingsError
from .data import conventional_names
from .finetune_trainer import FinetuneTrainer, split_loss_terms
from .intermediate_distillation import (
    attention_distillation_loss,
    check_attention_heads,
    intermediate_distillation_loss,
    task_layer_map,
)
from .task_recipe import distillation_alpha as recipe_distillation_alpha

__all__ = [
    "TEACHER_LOGITS",
    "TaskDistillationTrainer",
    "TeacherLogitsCollator",
    "attach_teacher_logits",
    "check_task_head",
    "has_task_head",
    "label_augmented_examples",
    "load_task_teacher",
]

logger = logging.getLogger(__name__)

TEACHER_LOGITS = "teacher_logits"
_HEAD_SUFFIXES = {
    "ner": "ForTokenClassification",
    "classification": "ForSequenceClassification",
    "regression": "ForSequenceClassification",
}


def has_task_head(folder: str | Path, task_type: str) -> bool:
    """Whether ``folder`` holds a model with a head of the task's kind (``config.json``'s ``architectures``): a
    teacher already fine-tuned for such a task, rather than a pretrained encoder."""
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        return False
    architectures = AutoConfig.from_pretrained(folder, **FROM_PRETRAINED_KWARGS).architectures or []
    return any(name.endswith(_HEAD_SUFFIXES[task_type]) for name in architectures)


def check_task_head(folder: str | Path, task_type: str, label_names: list[str] | None, glue_task=None):
    """Refuse a teacher folder whose head is not of the task's kind or whose labels are not the data's, in the same
    order (``RunSettingsError`` naming both); return its config."""
    path = Path(folder)
    if not (path / "config.json").is_file():
        raise RunSettingsError(f"--teacher {folder!r}: not a model folder (no config.json there).")
    config = AutoConfig.from_pretrained(path, **FROM_PRETRAINED_KWARGS)
    suffix = _HEAD_SUFFIXES[task_type]
    architectures = config.architectures or []
    if not any(name.endswith(suffix) for name in architectures):
        raise RunSettingsError(
            f"--teacher {folder}: its architectures are {architectures or 'not recorded'}, without a *{suffix} head; "
            f"task distillation needs a teacher fine-tuned on this task (compact-bert finetune --model_name_or_path "
            f"<teacher> ... writes one)."
        )
    if task_type == "regression":
        if config.num_labels != 1:
            raise RunSettingsError(
                f"--teacher {folder}: a regression task needs a teacher with num_labels=1, got {config.num_labels}."
            )
    else:
        teacher_labels = [str(config.id2label[index]) for index in range(config.num_labels)]
        if conventional_names(teacher_labels, glue_task) != [str(name) for name in label_names]:
            raise RunSettingsError(
                f"--teacher {folder}: its labels {teacher_labels} (config.json id2label) differ from the data's "
                f"{label_names}; the teacher must have been fine-tuned on the same label set, in the same order."
            )
    return config


def load_task_teacher(folder: str, task_type: str, label_names: list[str] | None, tokenizer, glue_task=None):
    """The fine-tuned teacher in ``folder``, frozen, after checking that it fits the task: a trained head of the
    task's kind, the data's label set in the same order, and a vocabulary equal to the student's tokenizer's.
    A teacher whose labels are a GLUE task's ids (``0`` / ``1``: saved before ids got their names) matches data
    labelled with that task's names (``glue_task``)."""
    check_task_head(folder, task_type, label_names, glue_task)
    path = Path(folder)
    teacher_tokenizer_files = [name for name in ("tokenizer.json", "vocab.txt") if (path / name).is_file()]
    if teacher_tokenizer_files:
        from transformers import AutoTokenizer

        try:
            teacher_tokenizer = AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as error:
            raise RunSettingsError(
                f"--teacher {folder}: its tokenizer files cannot be read ({error}); the teacher's "
                "folder must hold the tokenizer it was trained with."
            ) from None
        if tokenizer_fingerprint(teacher_tokenizer) != tokenizer_fingerprint(tokenizer):
            raise RunSettingsError(
                f"--teacher {folder}: its tokenizer ({len(teacher_tokenizer)} tokens) is not the student's "
                f"({len(tokenizer)} tokens): the teacher would read other token ids. Use a student with the teacher's "
                "vocabulary (--tokenizer_name <teacher folder>)."
            )
    auto_class = AutoModelForTokenClassification if task_type == "ner" else AutoModelForSequenceClassification
    teacher, info = auto_class.from_pretrained(path, output_loading_info=True, **FROM_PRETRAINED_KWARGS)
    missing = [key for key in info.get("missing_keys", ()) if "classifier" in key or "qa_outputs" in key]
    if missing:
        raise RunSettingsError(
            f"--teacher {folder}: its task head was not in the checkpoint ({', '.join(missing)}); "
            "give a teacher fine-tuned on this task."
        )
    return freeze_teacher(teacher)


@torch.no_grad()
def _teacher_logits(teacher, dataset: datasets.Dataset, collator, batch_size: int) -> dict[str, torch.Tensor]:
    """Logits of every example, in order; token-level logits padded to the longest example with zeros."""
    columns = [name for name in ("input_ids", "token_type_ids", "attention_mask") if name in dataset.column_names]
    inputs = dataset.select_columns(columns)
    batches = []
    for start in range(0, len(inputs), batch_size):
        rows = inputs[start : start + batch_size]  # one read of the batch's columns
        batch = collator([dict(zip(columns, values)) for values in zip(*(rows[name] for name in columns))])
        batches.append(teacher(**{name: batch[name] for name in columns}).logits.float())
    if batches[0].dim() == 2:
        return {"logits": torch.cat(batches)}
    longest = max(batch.shape[1] for batch in batches)
    padded = [torch.nn.functional.pad(batch, (0, 0, 0, longest - batch.shape[1])) for batch in batches]
    return {"logits": torch.cat(padded)}


def attach_teacher_logits(
    teacher,
    dataset: datasets.Dataset,
    tokenizer,
    collator,
    max_length: int,
    task_type: str,
    cache_dir: str | None,
    batch_size: int = 64,
) -> tuple[datasets.Dataset, dict]:
    """``dataset`` with a ``teacher_logits`` column (from the cache, computed once per teacher, tokenizer, data and
    max length), and a record of the cache entry used."""
    fingerprints = {
        "kind": f"{task_type}-logits",
        "teacher": teacher_fingerprint(teacher),
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "data": data_fingerprint(dataset),
        "max_length": max_length,
    }
    result = cached_teacher_outputs(
        lambda: _teacher_logits(teacher, dataset, collator, batch_size), fingerprints, cache_dir
    )
    logits = result.outputs["logits"]
    if logits.shape[0] != len(dataset):  # a bug, never the user's input: the key includes the data
        raise RuntimeError(f"Cached teacher logits hold {logits.shape[0]} examples, the data {len(dataset)}.")
    if task_type == "ner":
        values = [logits[index, : len(ids)].tolist() for index, ids in enumerate(dataset["input_ids"])]
    else:
        values = logits.tolist()
    logger.info("Teacher logits %s %s", "reused from" if result.reused else "computed into", result.folder)
    return dataset.add_column(TEACHER_LOGITS, values), {"folder": str(result.folder), "reused": result.reused}


def label_augmented_examples(dataset: datasets.Dataset, augmented: list[bool], task_type: str) -> datasets.Dataset:
    """The augmented examples' ``labels`` replaced by the teacher's prediction (its argmax, or its value for
    regression; for NER the argmax of every labelled token, the first sub-token of each word), as Tang et al.
    (2019) label their transfer set; the original examples keep their gold labels."""

    def argmax(values):
        return max(range(len(values)), key=values.__getitem__)

    def relabel(example, index):
        if augmented[index]:
            logits = example[TEACHER_LOGITS]
            if task_type == "ner":
                example["labels"] = [
                    label if label == -100 else argmax(row) for label, row in zip(example["labels"], logits)
                ]
            else:
                example["labels"] = logits[0] if task_type == "regression" else argmax(logits)
        return example

    return dataset.map(relabel, with_indices=True)


class TeacherLogitsCollator:
    """Wraps the task's collator: the ``teacher_logits`` of the examples come out as one tensor, token-level
    logits padded like the tokens (padding rows are never read: the loss averages over real tokens)."""

    def __init__(self, collator):
        self.collator = collator

    def __call__(self, features: list[dict]) -> dict:
        teacher = [feature.pop(TEACHER_LOGITS) for feature in features if TEACHER_LOGITS in feature]
        batch = self.collator(features)
        if teacher:
            tensors = [torch.tensor(values, dtype=torch.float32) for values in teacher]
            if tensors[0].dim() == 2:
                length = batch["input_ids"].shape[1]
                tensors = [torch.nn.functional.pad(tensor, (0, 0, 0, length - tensor.shape[0])) for tensor in tensors]
            batch[TEACHER_LOGITS] = torch.stack(tensors)
        return batch


class TaskDistillationTrainer(FinetuneTrainer):
    """``FinetuneTrainer`` whose training loss mixes the hard labels with the teacher's predictions (module
    docstring); ``distillation_alpha`` (unset: the recipe's for the model's head, ``task_recipe.distillation_alpha``)
    and ``distillation_temperature`` come from the training arguments. With
    ``distillation_hidden_weight`` β > 0 and the ``teacher`` model, the student's hidden states also learn the
    teacher's (``intermediate_distillation.py``): ``+ β · L_hidden``, the teacher run on every training batch; with
    ``distillation_attention_weight`` γ > 0 their attention too: ``+ γ · L_attn``. Logs ``task_loss``,
    ``distillation_loss``, ``hidden_loss``, ``attention_loss`` and, for MoE students, ``balance_loss``."""

    def __init__(self, *args, teacher=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = teacher
        self.layer_map = None
        # None (the arguments never went through ``finetune``, which resolves it): the recipe's for the head's kind
        self.distillation_alpha = self.args.distillation_alpha
        if self.distillation_alpha is None:
            regression = getattr(self.model.config, "problem_type", None) == "regression" or (
                self.model.config.num_labels == 1
            )
            self.distillation_alpha = recipe_distillation_alpha("regression" if regression else "classification")
        weights = {
            "distillation_hidden_weight": self.args.distillation_hidden_weight,
            "distillation_attention_weight": self.args.distillation_attention_weight,
        }
        needed = [name for name, weight in weights.items() if weight > 0]
        if needed:
            if teacher is None:
                raise ValueError(f"{' and '.join(needed)} > 0 need the teacher model (teacher=...).")
            self.layer_map = task_layer_map(self.model.config, teacher.config.num_hidden_layers)
        if self.args.distillation_attention_weight > 0:
            check_attention_heads(self.model.config, teacher.config)
            # Fused attention never returns its probabilities: teacher and student run eager attention (a
            # compact-bert student switches by itself when they are asked for, modeling/shared_blocks; transformers'
            # BERT needs to be told).
            use_eager_attention(teacher)
            use_eager_attention(self.model)

    def _teacher_outputs(self, inputs, hidden: bool, attentions: bool):
        device = inputs["input_ids"].device
        if next(self.teacher.parameters()).device != device:
            self.teacher.to(device)
        names = ("input_ids", "attention_mask", "token_type_ids")
        with torch.no_grad():
            return self.teacher(
                **{name: inputs[name] for name in names if name in inputs},
                output_hidden_states=hidden,
                output_attentions=attentions,
            )

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if TEACHER_LOGITS not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, TEACHER_LOGITS]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        teacher_logits = inputs.pop(TEACHER_LOGITS, None)
        inputs = with_evaluation_router_stats(model, inputs)
        intermediate = self.layer_map is not None and teacher_logits is not None and model.training
        hidden = intermediate and self.args.distillation_hidden_weight > 0
        attentions = intermediate and self.args.distillation_attention_weight > 0
        if intermediate:
            inputs = {**inputs, "output_hidden_states": hidden, "output_attentions": attentions}
        loss, outputs = Trainer.compute_loss(
            self, model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
        )
        terms = split_loss_terms(loss, outputs)
        if teacher_logits is not None:
            alpha, temperature = self.distillation_alpha, self.args.distillation_temperature
            logits = outputs["logits"]
            if logits.dim() == 3:
                distillation = token_soft_target_loss(
                    logits, teacher_logits.to(logits.device), inputs["attention_mask"], temperature
                )
            else:
                distillation = soft_target_loss(logits, teacher_logits.to(logits.device), temperature)
            loss = alpha * terms["task_loss"] + (1.0 - alpha) * distillation + terms.get("balance_loss", 0.0)
            terms["distillation_loss"] = distillation
            if intermediate:
                teacher = self._teacher_outputs(inputs, hidden, attentions)
                mask = inputs.get("attention_mask")
                if hidden:
                    terms["hidden_loss"] = intermediate_distillation_loss(
                        outputs["hidden_states"], teacher.hidden_states, self.layer_map, mask
                    )
                    loss = loss + self.args.distillation_hidden_weight * terms["hidden_loss"]
                if attentions:
                    terms["attention_loss"] = attention_distillation_loss(
                        outputs["attentions"], teacher.attentions, self.layer_map, mask
                    )
                    loss = loss + self.args.distillation_attention_weight * terms["attention_loss"]
        self.record_loss_terms(terms, "train" if model.training else "eval")
        return (loss, outputs) if return_outputs else loss
