"""MobileBERT layer-wise knowledge transfer from an IB-BERT teacher as a ``transformers.Trainer``.

The loss of a step depends on the stage of the chosen strategy (``mobilebert_stages``): layer-wise
feature-map and attention transfer (eq. 2-3), pre-training distillation (eq. 4), or both (AKT). Freezing
follows the stage: units whose learning-rate multiplier is 0 stop requiring gradients at the stage
boundary, and every optimizer parameter group (one per unit) gets its multiplier through the scheduler,
so a checkpoint resumes in the right stage with the right learning rates.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict

import torch
from torch.nn import functional as F
from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainerCallback

from ..training.run_errors import RunSettingsError
from .losses import (
    attention_transfer_loss,
    feature_map_transfer_loss,
    mlm_distillation_loss,
    pretraining_distillation_loss,
)
from .mobilebert_config import MobileBertDistillationConfig, build_base_scheduler
from .mobilebert_stages import Stage, parameter_unit, plan_stages, stage_at, unit_lr_scale
from .trainer_utils import DistillationTrainer

__all__ = ["MobileBertDistillationTrainer", "check_mobilebert_compatibility", "copy_embeddings_and_heads"]

logger = logging.getLogger(__name__)

# The bottleneck families whose feature maps a MobileBERT student can be taught layer by layer (paper 001 §3.5).
_BOTTLENECK_TYPES = ("ib_bert", "compact_mobilebert", "mobilebert")


def check_mobilebert_compatibility(teacher_config, student_config, args: MobileBertDistillationConfig) -> None:
    """Layer-wise transfer compares layer ℓ with layer ℓ, feature map with feature map, head with head."""
    if teacher_config.model_type not in _BOTTLENECK_TYPES:
        raise RunSettingsError(
            f"The teacher is a {teacher_config.model_type!r} model; MobileBERT knowledge transfer needs an IB-BERT "
            f"teacher ({', '.join(repr(kind) for kind in _BOTTLENECK_TYPES)}: feature maps and attention of the "
            "student's shape, e.g. `compact-bert pretrain --preset ib-bert-large`)."
        )
    fields = ["hidden_size", "num_hidden_layers", "vocab_size"]
    if args.attention_weight > 0:
        fields.append("num_attention_heads")
    if args.strategy in ("jkt", "pkt"):
        fields += ["embedding_size", "max_position_embeddings", "type_vocab_size", "trigram_input"]
    problems = [
        f"{name}: teacher {getattr(teacher_config, name, None)!r} vs student {getattr(student_config, name, None)!r}"
        for name in fields
        if getattr(teacher_config, name, None) != getattr(student_config, name, None)
    ]
    if problems:
        raise RunSettingsError(
            f"Teacher and student are incompatible for MobileBERT knowledge transfer ({args.strategy}): "
            + "; ".join(problems)
            + ". Feature maps (hidden_size), layers and attention heads must match; JKT/PKT also copy the "
            "embeddings and heads, which must have equal shapes."
        )


def copy_embeddings_and_heads(teacher: torch.nn.Module, student: torch.nn.Module) -> None:
    """JKT/PKT: the embedding layer and the classifier are copied from the teacher (paper 001 §3.6)."""
    student.base_model.embeddings.load_state_dict(teacher.base_model.embeddings.state_dict())
    if (
        getattr(student.base_model, "pooler", None) is not None
        and getattr(teacher.base_model, "pooler", None) is not None
    ):
        student.base_model.pooler.load_state_dict(teacher.base_model.pooler.state_dict())
    student_heads, teacher_heads = getattr(student, "cls", None), getattr(teacher, "cls", None)
    if student_heads is not None and teacher_heads is not None:
        for name, module in student_heads.named_children():
            if hasattr(teacher_heads, name):
                module.load_state_dict(getattr(teacher_heads, name).state_dict())


def _mlm_logits(outputs) -> torch.Tensor:
    logits = getattr(outputs, "prediction_logits", None)
    return logits if logits is not None else outputs.logits


def _stage_scaled(base_lambda, unit: str, stages: list[Stage], lower_layer_lr_scale: float, step: int) -> float:
    return base_lambda(step) * unit_lr_scale(unit, stage_at(stages, step), lower_layer_lr_scale)


class _StageCallback(TrainerCallback):
    def __init__(self, trainer: MobileBertDistillationTrainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer.enter_stage(state.global_step)

    def on_step_begin(self, args, state, control, **kwargs):
        self.trainer.enter_stage(state.global_step)


class MobileBertDistillationTrainer(DistillationTrainer):
    """Distills a MobileBERT student from a frozen IB-BERT (or any bottleneck-BERT) teacher.

    ``model`` and ``teacher`` are pre-training (MLM + NSP) or masked-LM models of the bottleneck family.
    Logged terms: ``feature_map_loss``, ``attention_loss`` (layer-wise stages), ``mlm_loss``, ``kd_loss``,
    ``nsp_loss`` (pre-training distillation) and ``stage`` (index into ``self.stages``).
    """

    def __init__(self, model, teacher, args: MobileBertDistillationConfig, **kwargs):
        check_mobilebert_compatibility(teacher.config, model.config, args)
        num_layers = model.config.num_hidden_layers
        steps_per_stage = args.steps_per_stage or max(1, args.max_steps // (2 * num_layers))
        if args.strategy == "pkt" and steps_per_stage * num_layers > args.max_steps:
            raise RunSettingsError(
                f"PKT needs {num_layers} layer stages of {steps_per_stage} steps, more than max_steps "
                f"({args.max_steps}); lower --steps_per_stage or raise --max_steps."
            )
        self.stages = plan_stages(
            args.strategy,
            args.max_steps,
            num_layers,
            args.layerwise_steps or max(1, args.max_steps // 2),
            steps_per_stage,
        )
        if args.strategy in ("jkt", "pkt"):
            copy_embeddings_and_heads(teacher, model)
        self._current_stage: Stage | None = None
        super().__init__(model, teacher, args, **kwargs)
        self.add_callback(_StageCallback(self))

    # -- stages ------------------------------------------------------------------------------------
    def enter_stage(self, step: int) -> None:
        stage = stage_at(self.stages, step)
        if stage == self._current_stage:
            return
        for name, parameter in self.model.named_parameters():
            parameter.requires_grad_(unit_lr_scale(parameter_unit(name), stage, self.args.lower_layer_lr_scale) > 0)
        logger.info("Step %d: entering stage %s (steps %d-%d)", step, stage.name, stage.start, stage.end)
        self._current_stage = stage

    def create_optimizer(self, model=None):
        """One parameter group per unit (embeddings, each layer, heads) and weight-decay class.

        ``model`` is the (possibly wrapped) model that transformers 5 passes when it creates the optimizer
        after sharding (FSDP); 4.57 never passes one."""
        if self.optimizer is None:
            model = self.model if model is None else model
            decay = set(self.get_decay_parameter_names(model))
            groups: dict[tuple[str, bool], list[torch.nn.Parameter]] = defaultdict(list)
            for name, parameter in model.named_parameters():
                groups[(parameter_unit(name), name in decay)].append(parameter)
            parameter_groups = [
                {"params": params, "weight_decay": self.args.weight_decay if decays else 0.0, "unit": unit}
                for (unit, decays), params in groups.items()
            ]
            optimizer_class, optimizer_kwargs = self.get_optimizer_cls_and_kwargs(self.args, model)
            self.optimizer = optimizer_class(parameter_groups, **optimizer_kwargs)
        return self.optimizer

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """The configured schedule, times each unit's learning-rate multiplier in the current stage.

        Every transformers schedule that is a ``LambdaLR`` (all but the metric-driven ones, which the config
        rejects) composes: group ``g`` gets ``learning_rate · schedule_g(step) · multiplier(unit_g, stage)``.
        """
        if self.lr_scheduler is None:
            optimizer = optimizer or self.optimizer
            base = build_base_scheduler(self.args, optimizer, num_training_steps)
            lambdas = [
                functools.partial(
                    _stage_scaled, base_lambda, group["unit"], self.stages, self.args.lower_layer_lr_scale
                )
                for base_lambda, group in zip(base.lr_lambdas, optimizer.param_groups)
            ]
            self.lr_scheduler = LambdaLR(optimizer, lambdas)
            self._created_lr_scheduler = True  # both lines then rebuild it for a second `train()` call
        return self.lr_scheduler

    # -- loss ----------------------------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        stage = stage_at(self.stages, self.state.global_step)
        evaluating = not model.training
        layerwise = stage.objective in ("combined", "layerwise") or evaluating
        distilling = stage.objective in ("combined", "pd") or evaluating
        attentions = layerwise and self.args.attention_weight > 0
        labels, next_sentence_label = inputs.get("labels"), inputs.get("next_sentence_label")
        model_inputs = {key: inputs[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in inputs}
        attention_mask = model_inputs.get("attention_mask")

        student = model(**model_inputs, output_hidden_states=layerwise, output_attentions=attentions)
        with torch.no_grad():
            teacher_model = self.teacher if distilling else self.teacher.base_model
            teacher = teacher_model(**model_inputs, output_hidden_states=layerwise, output_attentions=attentions)

        terms: dict[str, torch.Tensor] = {"stage": torch.tensor(float(self.stages.index(stage)))}
        loss = None
        if layerwise:
            layers = (
                [stage.layer] if stage.layer is not None and not evaluating else range(model.config.num_hidden_layers)
            )
            feature_map = torch.stack(
                [
                    feature_map_transfer_loss(
                        student.hidden_states[layer + 1],
                        teacher.hidden_states[layer + 1],
                        attention_mask,
                        self.args.normalized_feature_map_loss,
                    )
                    for layer in layers
                ]
            ).mean()
            knowledge_transfer = self.args.feature_map_weight * feature_map
            terms["feature_map_loss"] = feature_map
            if attentions:
                attention = torch.stack(
                    [
                        attention_transfer_loss(student.attentions[layer], teacher.attentions[layer], attention_mask)
                        for layer in layers
                    ]
                ).mean()
                knowledge_transfer = knowledge_transfer + self.args.attention_weight * attention
                terms["attention_loss"] = attention
            if stage.objective != "pd":
                loss = knowledge_transfer
        if distilling and labels is not None:
            # Both terms only read the masked positions: gather them once, so the backward pass builds one
            # vocabulary-sized gradient instead of three.
            selected = labels != -100
            student_logits, masked_labels = _mlm_logits(student)[selected], labels[selected]
            mlm = (
                F.cross_entropy(student_logits, masked_labels) if masked_labels.numel() else student_logits.sum() * 0.0
            )
            distillation = mlm_distillation_loss(
                student_logits, _mlm_logits(teacher)[selected], masked_labels, self.args.temperature
            )
            next_sentence = None
            if next_sentence_label is not None and getattr(student, "seq_relationship_logits", None) is not None:
                next_sentence = F.cross_entropy(student.seq_relationship_logits, next_sentence_label)
                terms["nsp_loss"] = next_sentence
            terms.update(mlm_loss=mlm, kd_loss=distillation)
            if stage.objective != "layerwise":
                pd = pretraining_distillation_loss(mlm, distillation, next_sentence, self.args.alpha)
                loss = pd if loss is None else loss + pd
        if loss is None:
            raise ValueError(f"Stage {stage.name} needs MLM `labels` in the batch (use the pre-training collator).")
        self.record_loss_terms(terms, "eval" if evaluating else "train")
        return (loss, student) if return_outputs else loss
