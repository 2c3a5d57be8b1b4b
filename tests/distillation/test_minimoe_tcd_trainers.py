"""MiniMoE relation distillation (from the packaged all-MiniLM-L6-v2) and TCD (from transformers' BertModel)."""

from __future__ import annotations

import functools

import pytest
import torch
from transformers import BertConfig, BertModel

from compact_bert.configuration import MiniMoEConfig, MoEBertConfig
from compact_bert.distillation.data import PretrainingCollator
from compact_bert.distillation.minimoe_config import MiniMoEDistillationConfig
from compact_bert.distillation.minimoe_trainer import MiniMoEDistillationTrainer
from compact_bert.distillation.tcd_config import TransferCapabilityDistillationConfig
from compact_bert.distillation.tcd_trainer import TransferCapabilityDistillationTrainer
from compact_bert.distillation.teachers import load_encoder
from compact_bert.modeling import MiniMoEModel, MoEBertForMaskedLM
from tests.distillation.helpers import held_out_blocks, tokenizer

COMMON = {
    "per_device_train_batch_size": 8,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
    "disable_tqdm": True,
    "use_cpu": True,
    "seed": 0,
    "warmup_steps": 0,
}


@functools.cache
def packaged_teacher():
    return load_encoder("all-MiniLM-L6-v2")


def _snapshot(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def _minimoe_student(**fields):
    config = MiniMoEConfig(
        hidden_size=64,
        num_attention_heads=2,
        intermediate_size=128,
        num_hidden_layers=2,
        max_position_embeddings=64,
        num_experts=4,
        **fields,
    )
    return MiniMoEModel(config)


@pytest.mark.parametrize("auxiliary", [False, True])
def test_minimoe_relation_distillation_learns_and_logs_balance(tmp_path, auxiliary):
    torch.manual_seed(0)
    teacher = packaged_teacher()
    before_teacher = _snapshot(teacher)
    student = _minimoe_student(use_auxiliary_attention=auxiliary)
    args = MiniMoEDistillationConfig(output_dir=str(tmp_path), max_steps=12, learning_rate=3e-3, **COMMON)
    trainer = MiniMoEDistillationTrainer(
        model=student,
        teacher=teacher,
        args=args,
        train_dataset=held_out_blocks(False),
        eval_dataset=held_out_blocks(False, 16),
        data_collator=PretrainingCollator(tokenizer()),
    )
    start = trainer.evaluate()
    trainer.train()
    end = trainer.evaluate()
    assert end["eval_relation_loss"] < start["eval_relation_loss"]
    logged = [entry for entry in trainer.state.log_history if "relation_loss" in entry]
    assert len(logged) == 12 and all(entry["balance_loss"] > 0 for entry in logged)
    assert all(0 <= entry["block1_min_expert_share"] <= entry["block1_max_expert_share"] <= 1 for entry in logged)
    assert all("block0_dropped_fraction" in entry for entry in logged)
    assert trainer.student_layer == ("auxiliary" if auxiliary else 1) and trainer.teacher_layer == 5
    assert all(torch.equal(before_teacher[name], tensor) for name, tensor in teacher.state_dict().items())
    assert not any(parameter.requires_grad for parameter in teacher.parameters())


def test_minimoe_trainer_checks_relation_heads_and_layers(tmp_path):
    args = MiniMoEDistillationConfig(output_dir=str(tmp_path), max_steps=2, num_relation_heads=5, **COMMON)
    with pytest.raises(ValueError, match=r"must divide the teacher's all-head size \(384\)"):
        MiniMoEDistillationTrainer(model=_minimoe_student(), teacher=packaged_teacher(), args=args)
    args = MiniMoEDistillationConfig(output_dir=str(tmp_path), max_steps=2, teacher_layer=9, **COMMON)
    with pytest.raises(ValueError, match="`teacher_layer` 9 is out of range for a model with 6 layers"):
        MiniMoEDistillationTrainer(model=_minimoe_student(), teacher=packaged_teacher(), args=args)


def _tcd_pair(student_layers=2, teacher_layers=2, heads=2):
    teacher = BertModel(
        BertConfig(
            hidden_size=48,
            num_hidden_layers=teacher_layers,
            num_attention_heads=heads,
            intermediate_size=96,
            max_position_embeddings=64,
        )
    )
    student = MoEBertForMaskedLM(
        MoEBertConfig(
            hidden_size=32,
            num_hidden_layers=student_layers,
            num_attention_heads=2,
            intermediate_size=64,
            num_experts=4,
            max_position_embeddings=64,
        )
    )
    return teacher, student


def test_tcd_learns_relations_with_a_transformers_teacher(tmp_path):
    torch.manual_seed(0)
    teacher, student = _tcd_pair()
    before_teacher = _snapshot(teacher)
    args = TransferCapabilityDistillationConfig(
        output_dir=str(tmp_path),
        max_steps=10,
        learning_rate=3e-3,
        attention_weight=1.0,
        sampled_tokens=128,
        token_group_size=32,
        **COMMON,
    )
    trainer = TransferCapabilityDistillationTrainer(
        model=student,
        teacher=teacher,
        args=args,
        train_dataset=held_out_blocks(False),
        eval_dataset=held_out_blocks(False, 16),
        data_collator=PretrainingCollator(tokenizer()),
    )
    start = trainer.evaluate()
    trainer.train()
    end = trainer.evaluate()
    for term in ("trunk_loss", "inner_loss", "attention_relation_loss"):
        assert end[f"eval_{term}"] < start[f"eval_{term}"], term
    logged = [entry for entry in trainer.state.log_history if "trunk_loss" in entry]
    assert len(logged) == 10 and all(
        0 < entry["balance_loss"] < float("inf") and "block0_max_expert_share" in entry for entry in logged
    )  # a KL to uniform routing: never exactly 0 on 128 tokens
    assert all(torch.equal(before_teacher[name], tensor) for name, tensor in teacher.state_dict().items())


def test_tcd_layer_count_mismatch_needs_a_layer_map(tmp_path):
    teacher, student = _tcd_pair(student_layers=2, teacher_layers=4)
    args = TransferCapabilityDistillationConfig(output_dir=str(tmp_path), max_steps=2, **COMMON)
    with pytest.raises(ValueError, match="pass --layer_map"):
        TransferCapabilityDistillationTrainer(model=student, teacher=teacher, args=args)
    mapped = TransferCapabilityDistillationConfig(output_dir=str(tmp_path), max_steps=2, layer_map="[1, 3]", **COMMON)
    assert TransferCapabilityDistillationTrainer(model=student, teacher=teacher, args=mapped).layer_map == [1, 3]
    with pytest.raises(ValueError, match="one teacher layer per student layer"):
        bad = TransferCapabilityDistillationConfig(output_dir=str(tmp_path), max_steps=2, layer_map="[1]", **COMMON)
        TransferCapabilityDistillationTrainer(model=student, teacher=teacher, args=bad)


def test_tcd_attention_relations_need_equal_heads(tmp_path):
    teacher, student = _tcd_pair(heads=4)
    args = TransferCapabilityDistillationConfig(output_dir=str(tmp_path), max_steps=2, attention_weight=1.0, **COMMON)
    with pytest.raises(ValueError, match="the teacher has 4 heads, the student 2"):
        TransferCapabilityDistillationTrainer(model=student, teacher=teacher, args=args)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sampled_tokens": 100, "token_group_size": 32}, "multiple of `token_group_size`"),
        ({"token_group_size": 1}, "token_group_size"),
        ({"layer_map": "[1, 'a']"}, "JSON list of integers"),
        ({"trunk_weight": -1.0}, "trunk_weight"),
    ],
)
def test_tcd_config_validation(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        TransferCapabilityDistillationConfig(output_dir=str(tmp_path), **fields)


def test_tcd_defaults_fit_the_default_batch(tmp_path):
    args = TransferCapabilityDistillationConfig(output_dir=str(tmp_path))
    default_block_size = 128  # CorpusArguments.block_size
    assert args.sampled_tokens % args.token_group_size == 0
    assert args.sampled_tokens <= args.per_device_train_batch_size * default_block_size


def test_tcd_trainer_rejects_a_sample_larger_than_a_batch(tmp_path):
    teacher, student = _tcd_pair()
    args = TransferCapabilityDistillationConfig(
        output_dir=str(tmp_path), max_steps=2, sampled_tokens=512, token_group_size=32, **COMMON
    )
    with pytest.raises(ValueError, match=r"--sampled_tokens 512 exceeds the 256 tokens of a batch"):
        TransferCapabilityDistillationTrainer(
            model=student,
            teacher=teacher,
            args=args,
            train_dataset=held_out_blocks(False),
            data_collator=PretrainingCollator(tokenizer()),
        )
