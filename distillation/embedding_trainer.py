"""Embedding distillation as a ``transformers.Trainer``: the student's sentence embedding learns the teacher's.

The teacher's embeddings are computed once per corpus and read from the batches (``teacher_embedding``, gathered
by the collator from the offline cache), so a step costs the student's forward and backward pass only. With
``relation_weight > 0`` the teacher also runs on every batch, for the MiniLMv2 relations of its last layer.
Checkpoints and the final folder are sentence-transformers folders (``embeddings.sentence_transformers_folder``):
every checkpoint loads with ``SentenceTransformer`` as the final model does.
"""

from __future__ import annotations

import os

import torch
from torch.nn import functional as F

from ..embeddings.sentence_transformers_folder import load_sentence_embedder, save_sentence_embedder
from ..evaluation.sts import StsPairs, evaluate_sts
from ..modeling.signals import SubmoduleRecorder
from ..training.run_errors import RunSettingsError
from .embedding_config import EmbeddingDistillationConfig
from .losses import self_attention_relation_loss
from .teachers import relation_module_names
from .trainer_utils import DistillationTrainer, with_balance_loss

__all__ = ["EmbeddingDistillationTrainer", "embedding_distillation_loss"]

_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
TRAINING_ARGS_NAME = "training_args.bin"


def embedding_distillation_loss(student_embeddings: torch.Tensor, teacher_embeddings: torch.Tensor) -> torch.Tensor:
    """Mean squared error over every component, as sentence-transformers' ``MSELoss`` (``nn.MSELoss()``)."""
    if student_embeddings.shape != teacher_embeddings.shape:
        raise RunSettingsError(
            f"Student embeddings {tuple(student_embeddings.shape)} and teacher embeddings "
            f"{tuple(teacher_embeddings.shape)} differ: a student narrower than its teacher needs a projection."
        )
    return F.mse_loss(student_embeddings.float(), teacher_embeddings.float())


class EmbeddingDistillationTrainer(DistillationTrainer):
    """Distills a ``SentenceEmbedder`` student from precomputed teacher embeddings (and, optionally, the teacher's
    relations). ``sts_pairs``: evaluation also reports the STS Spearman, Pearson and paraphrase recall there."""

    def __init__(self, model, teacher, args: EmbeddingDistillationConfig, sts_pairs: StsPairs | None = None, **kwargs):
        if teacher.config.vocab_size != model.config.vocab_size:
            raise RunSettingsError(
                f"Teacher vocab_size {teacher.config.vocab_size} differs from the student's {model.config.vocab_size}; "
                "both must read the same token ids."
            )
        self.sts_pairs = sts_pairs
        super().__init__(model, teacher, args, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        model_inputs = {key: inputs[key] for key in _MODEL_INPUTS if key in inputs}
        embedder = self.accelerator.unwrap_model(model)
        terms = {}
        if self.args.relation_weight > 0:
            last = embedder.config.num_hidden_layers - 1
            with SubmoduleRecorder(embedder.encoder, relation_module_names(last)) as student:
                outputs = model(**model_inputs)
            teacher_last = self.teacher.config.num_hidden_layers - 1
            with torch.no_grad(), SubmoduleRecorder(self.teacher, relation_module_names(teacher_last)) as teacher:
                self.teacher(**model_inputs)
            terms["relation_loss"] = self_attention_relation_loss(
                student.outputs, teacher.outputs, self.args.num_relation_heads, model_inputs.get("attention_mask")
            )
        else:
            outputs = model(**model_inputs)
        embeddings = outputs.sentence_embedding
        terms["embedding_loss"] = embedding_distillation_loss(embeddings, inputs["teacher_embedding"])
        with torch.no_grad():
            terms["teacher_cosine"] = F.cosine_similarity(
                embeddings.float(), inputs["teacher_embedding"].float()
            ).mean()
        loss = self.args.embedding_weight * terms["embedding_loss"]
        if "relation_loss" in terms:
            loss = loss + self.args.relation_weight * terms["relation_loss"]
        loss = with_balance_loss(loss, outputs.encoder_outputs, terms)
        self.record_loss_terms(terms, "train" if model.training else "eval")
        return (loss, outputs) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """Evaluation reports the losses (the STS metrics are added by ``evaluate``)."""
        with torch.no_grad(), self.evaluation_batch(inputs) as drawn:
            loss = self.compute_loss(model, drawn).detach()
        return loss, None, None

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        """The held-out losses, plus the STS metrics of the student on ``sts_pairs`` (Spearman of cosine
        similarity ×100, as sentence-transformers' ``EmbeddingSimilarityEvaluator``)."""
        metrics = {}
        if eval_dataset is not None or self.eval_dataset is not None:
            metrics = super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
        if self.sts_pairs is not None and self.is_world_process_zero():
            embedder = self.accelerator.unwrap_model(self.model)
            scores = evaluate_sts(
                embedder, self.processing_class, self.sts_pairs, self.args.per_device_eval_batch_size
            )
            sts = {f"{metric_key_prefix}_sts_{name}": value for name, value in scores.items() if name != "pairs"}
            self.log(sts)
            metrics.update(sts)
        return metrics

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """Every checkpoint and the final folder as a sentence-transformers folder (encoder, module files and
        projection, tokenizer), plus Trainer's pickle of the arguments."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if not self.args.should_save:
            return
        os.makedirs(output_dir, exist_ok=True)
        save_sentence_embedder(self.accelerator.unwrap_model(self.model), output_dir, self.processing_class)
        torch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        """Resume: the encoder's and the projection's weights from the checkpoint's sentence-transformers folder."""
        embedder = self.accelerator.unwrap_model(model if model is not None else self.model)
        restored = load_sentence_embedder(resume_from_checkpoint)
        embedder.encoder.load_state_dict(restored.encoder.state_dict())
        if (embedder.projection is None) != (restored.projection is None):
            raise RunSettingsError(
                f"{resume_from_checkpoint} and this run differ in whether the student has a projection."
            )
        if embedder.projection is not None:
            embedder.projection.load_state_dict(restored.projection.state_dict())
