"""MiniLMv2 self-attention relation distillation into a MiniMoE student, as a ``transformers.Trainer``.

Loss per step: ``relation_weight · L_relation + aux_loss``, where ``L_relation`` distills the Q-Q, K-K and
V-V relations of one teacher layer into the student's last layer (or its auxiliary MHA block), and
``aux_loss`` is the student's Switch load-balancing loss (its config holds α and the capacity factor).
Logged: ``relation_loss``, ``balance_loss`` and, per MoE block, the largest and smallest expert share and
the dropped-token fraction.
"""

from __future__ import annotations

import torch

from ..modeling.signals import SubmoduleRecorder
from ..training.routing_keys import with_evaluation_router_stats
from ..training.run_errors import RunSettingsError
from .losses import self_attention_relation_loss
from .minimoe_config import MiniMoEDistillationConfig
from .teachers import relation_module_names, resolve_layer
from .trainer_utils import DistillationTrainer, with_balance_loss

__all__ = ["MiniMoEDistillationTrainer"]


class MiniMoEDistillationTrainer(DistillationTrainer):
    """Distills a (MiniMoE or dense MiniLM) student base model from a frozen BERT-like teacher encoder."""

    def __init__(self, model, teacher, args: MiniMoEDistillationConfig, **kwargs):
        if teacher.config.vocab_size != model.config.vocab_size:
            raise RunSettingsError(
                f"Teacher vocab_size {teacher.config.vocab_size} differs from the student's {model.config.vocab_size}; "
                "both must read the same token ids."
            )
        self.teacher_layer = resolve_layer(args.teacher_layer, teacher.config.num_hidden_layers, "teacher_layer")
        uses_auxiliary = bool(getattr(model.config, "use_auxiliary_attention", False))
        self.student_layer = "auxiliary" if uses_auxiliary else model.config.num_hidden_layers - 1
        for role, config in (("teacher", teacher.config), ("student", model.config)):
            if config.hidden_size % args.num_relation_heads:
                raise RunSettingsError(
                    f"`num_relation_heads` ({args.num_relation_heads}) must divide the {role}'s all-head size "
                    f"({config.hidden_size})."
                )
        super().__init__(model, teacher, args, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        model_inputs = {key: inputs[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in inputs}
        student_model = self.accelerator.unwrap_model(model)
        # Recording the auxiliary block's Q/K/V (``relation_module_names("auxiliary")``) runs it: signals.py.
        extra = with_evaluation_router_stats(student_model, {})
        with SubmoduleRecorder(student_model, relation_module_names(self.student_layer)) as student:
            outputs = model(**model_inputs, **extra)
        with torch.no_grad(), SubmoduleRecorder(self.teacher, relation_module_names(self.teacher_layer)) as teacher:
            self.teacher(**model_inputs)
        relation = self_attention_relation_loss(
            student.outputs, teacher.outputs, self.args.num_relation_heads, model_inputs.get("attention_mask")
        )
        terms = {"relation_loss": relation}
        loss = with_balance_loss(self.args.relation_weight * relation, outputs, terms)
        self.record_loss_terms(terms, "train" if model.training else "eval")
        return (loss, outputs) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """Evaluation reports the losses only: the student has no logits to compare with labels. The batch's masks
        are drawn from its evaluation index, as every compact-bert trainer does (``evaluation_batch``)."""
        with torch.no_grad(), self.evaluation_batch(inputs) as drawn:
            loss = self.compute_loss(model, drawn).detach()
        return loss, None, None
