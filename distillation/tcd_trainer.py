"""Transfer-capability distillation (paper 003): a vanilla BERT teaches a MoE-BERT how to represent.

Relations, not values, are aligned (eq. 6-11), at three locations of every layer: the trunk (normalized
states after the MHA and FFN LayerNorms), the residual inner (sublayer outputs before the residual add:
each LayerNorm's input minus its residual) and attention (query-key cosines per head). All are read with
hooks on BERT's module names, so the teacher may be any BERT-like encoder with matching layers (or a
``layer_map``). Trunk and inner relations use the same sampled token groups for teacher and student, drawn from
the step (``step_generator``), so a resumed run samples the groups the uninterrupted run would have.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F
from transformers import default_data_collator

from ..modeling.signals import SubmoduleRecorder, signal_module_name
from ..training.routing_keys import with_evaluation_router_stats
from ..training.run_errors import RunSettingsError
from .losses import cosine_relation_loss, query_key_relation_loss, sample_token_groups
from .tcd_config import TransferCapabilityDistillationConfig
from .teachers import resolve_layer
from .trainer_utils import DistillationTrainer, with_balance_loss

__all__ = ["TransferCapabilityDistillationTrainer"]

_SIGNALS = ("attention_norm", "ffn_norm", "query", "key")


def _recorded_names(layers: list[int]) -> dict[str, str]:
    return {f"{signal}/{layer}": signal_module_name(signal, layer) for layer in layers for signal in _SIGNALS}


def _collated_block_size(dataset, data_collator) -> int | None:
    """Tokens of one block as the model sees it, after the collator (which adds the special tokens)."""
    if dataset is None:
        return None
    first = next(iter(dataset), None)
    if not isinstance(first, dict) or "input_ids" not in first:
        return None
    batch = (data_collator or default_data_collator)([first])
    mask = batch.get("attention_mask")
    return int(mask.sum()) if mask is not None else int(batch["input_ids"].numel())


def _check_evaluation_holds_a_group(eval_dataset, data_collator, args: TransferCapabilityDistillationConfig) -> None:
    """Evaluation samples whole token groups of what each batch holds: with fewer tokens in an evaluation batch
    than one group, the relation losses would be a mean over nothing (NaN)."""
    block_size = _collated_block_size(eval_dataset, data_collator)
    if block_size is None or not hasattr(eval_dataset, "__len__"):
        return
    blocks = min(args.per_device_eval_batch_size, len(eval_dataset))
    if blocks * block_size < args.token_group_size:
        raise RunSettingsError(
            f"An evaluation batch holds {blocks * block_size} tokens ({blocks} block(s) of {block_size}: "
            f"--per_device_eval_batch_size {args.per_device_eval_batch_size}, {len(eval_dataset)} evaluation blocks), "
            f"fewer than one relation group (--token_group_size {args.token_group_size}), so eval_trunk_loss and "
            "eval_inner_loss would be undefined; raise --per_device_eval_batch_size or the evaluation blocks "
            "(--max_eval_blocks, --eval_corpus), or lower --token_group_size."
        )


def _check_batch_holds_the_sample(train_dataset, data_collator, args: TransferCapabilityDistillationConfig) -> None:
    """Relations sample ``sampled_tokens`` real tokens of every training batch: fail before training, not at
    the first step, when a batch cannot hold them."""
    block_size = _collated_block_size(train_dataset, data_collator)
    if block_size is None:
        return
    tokens_per_batch = args.per_device_train_batch_size * block_size
    if tokens_per_batch < args.sampled_tokens:
        raise RunSettingsError(
            f"--sampled_tokens {args.sampled_tokens} exceeds the {tokens_per_batch} tokens of a batch "
            f"(per_device_train_batch_size {args.per_device_train_batch_size} x block_size {block_size}); lower "
            "--sampled_tokens (a multiple of --token_group_size) or raise the batch or block size."
        )


class TransferCapabilityDistillationTrainer(DistillationTrainer):
    """Pre-trains a MoE-BERT masked-LM student with MLM + balance loss + relation distillation (eq. 13)."""

    def __init__(self, model, teacher, args: TransferCapabilityDistillationConfig, **kwargs):
        student_layers = model.config.num_hidden_layers
        teacher_layers = teacher.config.num_hidden_layers
        layer_map = args.parsed_layer_map
        if layer_map is None:
            if student_layers != teacher_layers:
                raise RunSettingsError(
                    f"The student has {student_layers} layers and the teacher {teacher_layers}; relations are aligned "
                    "layer by layer, so pass --layer_map (the teacher layer for each student layer)."
                )
            layer_map = list(range(student_layers))
        if len(layer_map) != student_layers:
            raise RunSettingsError(
                f"`layer_map` needs one teacher layer per student layer ({student_layers}), got {len(layer_map)}."
            )
        self.layer_map = [resolve_layer(layer, teacher_layers, "layer_map entry") for layer in layer_map]
        if args.attention_weight > 0 and teacher.config.num_attention_heads != model.config.num_attention_heads:
            raise RunSettingsError(
                f"Attention relations compare head by head: the teacher has {teacher.config.num_attention_heads} heads, "
                f"the student {model.config.num_attention_heads}; set --attention_weight 0 or match the heads."
            )
        _check_batch_holds_the_sample(kwargs.get("train_dataset"), kwargs.get("data_collator"), args)
        _check_evaluation_holds_a_group(kwargs.get("eval_dataset"), kwargs.get("data_collator"), args)
        super().__init__(model, teacher, args, **kwargs)

    def _relations(self, student, teacher, student_hidden, teacher_hidden, groups, attention_mask):
        """Trunk, inner and attention relation losses summed over the aligned layers (eq. 8, 11)."""
        trunk = inner = attention = torch.zeros((), device=student_hidden[0].device)
        for student_layer, teacher_layer in enumerate(self.layer_map):
            s, t = f"/{student_layer}", f"/{teacher_layer}"
            for norm, residual_s, residual_t in (
                ("attention_norm", student_hidden[student_layer], teacher_hidden[teacher_layer]),
                ("ffn_norm", student.outputs["attention_norm" + s], teacher.outputs["attention_norm" + t]),
            ):
                trunk = trunk + cosine_relation_loss(student.outputs[norm + s], teacher.outputs[norm + t], groups)
                inner = inner + cosine_relation_loss(
                    student.inputs[norm + s] - residual_s, teacher.inputs[norm + t] - residual_t, groups
                )
            if self.args.attention_weight > 0:
                attention = attention + query_key_relation_loss(
                    student.outputs["query" + s],
                    student.outputs["key" + s],
                    teacher.outputs["query" + t],
                    teacher.outputs["key" + t],
                    self.model.config.num_attention_heads,
                    attention_mask,
                )
        return trunk, inner, attention

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        model_inputs = {key: inputs[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in inputs}
        attention_mask = model_inputs.get("attention_mask")
        if attention_mask is None:
            attention_mask = torch.ones_like(model_inputs["input_ids"])
        student_model = self.accelerator.unwrap_model(model)
        student_names = _recorded_names(list(range(len(self.layer_map))))
        with SubmoduleRecorder(student_model, student_names, record_inputs=True) as student:
            outputs = model(**with_evaluation_router_stats(student_model, model_inputs), output_hidden_states=True)
        with (
            torch.no_grad(),
            SubmoduleRecorder(
                self.teacher, _recorded_names(sorted(set(self.layer_map))), record_inputs=True
            ) as teacher,
        ):
            teacher_hidden = self.teacher(**model_inputs, output_hidden_states=True).hidden_states
        sampled = self.args.sampled_tokens
        if not model.training:
            # Evaluation batches may be smaller (the last one keeps its remainder); sample what they hold (whole
            # groups) instead of failing.
            real = int(attention_mask.sum())
            sampled = min(sampled, real - real % self.args.token_group_size)
        labels = inputs["labels"]
        mlm = F.cross_entropy(outputs.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        loss, terms = mlm, {"mlm_loss": mlm}
        if sampled > 0:
            # Only a last, partial evaluation batch can hold less than one group (the trainer checked that full
            # batches hold one): it adds its MLM and balance losses, and no relation value of an empty group.
            groups = sample_token_groups(
                attention_mask, sampled, self.args.token_group_size, self.step_generator("token groups")
            )
            trunk, inner, attention = self._relations(
                student,
                teacher,
                outputs.hidden_states,
                teacher_hidden,
                groups.to(attention_mask.device),
                attention_mask,
            )
            loss = loss + self.args.trunk_weight * trunk + self.args.inner_weight * inner
            terms.update(trunk_loss=trunk, inner_loss=inner)
            if self.args.attention_weight > 0:
                loss = loss + self.args.attention_weight * attention
                terms["attention_relation_loss"] = attention
        loss = with_balance_loss(loss, outputs, terms)
        self.record_loss_terms(terms, "train" if model.training else "eval")
        return (loss, outputs) if return_outputs else loss
