"""Shared trainer plumbing: the teacher goes through Accelerate, loss terms are averaged over processes,
and command lines written for either transformers line parse on the installed one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tokenizers import BertWordPieceTokenizer

from compact_bert.cli.training_common import parse_arguments
from compact_bert.configuration import MiniMoEConfig
from compact_bert.distillation.data import default_tokenizer
from compact_bert.distillation.minimoe_config import MiniMoEDistillationConfig
from compact_bert.distillation.minimoe_trainer import MiniMoEDistillationTrainer
from compact_bert.modeling import MiniMoEModel
from compact_bert.training.compat import save_tokenizer, translate_legacy_training_flags
from compact_bert.training.training_arguments import CompactBertTrainingArguments
from tests.distillation.cli_helpers import REPO_ROOT, accelerate_launch, environment
from tests.distillation.distributed_terms_script import same_device

SCRIPT = Path(__file__).with_name("distributed_terms_script.py")


def _tiny_minimoe(num_hidden_layers=2):
    return MiniMoEModel(
        MiniMoEConfig(
            hidden_size=32,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=128,
            num_hidden_layers=num_hidden_layers,
            max_position_embeddings=32,
            num_experts=2,
        )
    )


def test_teacher_is_prepared_by_the_accelerator_in_evaluation_mode(tmp_path):
    teacher, student = _tiny_minimoe(), _tiny_minimoe()
    args = MiniMoEDistillationConfig(
        output_dir=str(tmp_path), max_steps=1, num_relation_heads=2, bf16=True, use_cpu=True, report_to="none"
    )
    trainer = MiniMoEDistillationTrainer(model=student, teacher=teacher, args=args)
    # Prepared when first read (in the first loss), after the Trainer prepared the student: the accelerator's
    # state is never edited, and an evaluation before training still prepares the student.
    assert not hasattr(teacher, "_original_forward") and not teacher.training
    assert trainer.teacher is teacher  # evaluation mode: never wrapped for gradient synchronisation
    assert hasattr(teacher, "_original_forward")  # the accelerator's mixed-precision autocast wraps its forward
    assert all(same_device(parameter.device, trainer.accelerator.device) for parameter in teacher.parameters())
    assert not teacher.training and not any(parameter.requires_grad for parameter in teacher.parameters())
    assert trainer.model_accepts_loss_kwargs is False  # the per-batch mean is divided by accumulation steps


def test_loss_terms_are_averaged_over_processes(tmp_path):
    command = accelerate_launch(2, str(SCRIPT), str(tmp_path))
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment(), cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    recorded = json.loads((tmp_path / "terms.json").read_text())
    train_logs = [entry for entry in recorded["log_history"] if "process_step" in entry]
    # Every 2 steps (--logging_steps 2), and step 1: the loss guard's reference log.
    assert [entry["step"] for entry in train_logs] == [1, 2, 4]
    previous = 0
    for entry in train_logs:
        # The steps since the last log on process 0 (values: the step indices) and process 1 (10 + each index).
        window = range(previous, entry["step"])
        assert entry["process_index"] == pytest.approx(0.5)
        assert entry["process_step"] == pytest.approx(sum(window) / len(window) + 5)
        assert entry["mlm_loss"] > 0
        previous = entry["step"]
    assert recorded["metrics"]["eval_process_index"] == pytest.approx(0.5)


@pytest.mark.parametrize("warmup", [["--warmup_ratio", "0.25"], ["--warmup_steps", "0.25"], ["--warmup_steps=2"]])
def test_flags_of_either_transformers_line_parse(tmp_path, warmup):
    argv = [
        "--output_dir",
        str(tmp_path),
        "--no_cuda",
        "--overwrite_output_dir",
        "--evaluation_strategy",
        "steps",
        "--eval_steps",
        "5",
        *warmup,
    ]
    (args,) = parse_arguments((CompactBertTrainingArguments,), argv, "test", "")
    assert args.get_warmup_steps(8) == 2 and args.use_cpu and args.eval_strategy == "steps"


def test_current_flags_pass_through_unchanged():
    argv = ["--output_dir", "x", "--max_steps", "3", "--use_cpu", "true", "--warmup_steps", "4", "--bf16"]
    assert translate_legacy_training_flags(argv) == argv


def test_saved_tokenizer_folder_has_the_wordpiece_vocabulary_on_both_lines(tmp_path):
    tokenizer = default_tokenizer()
    save_tokenizer(tokenizer, tmp_path)
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 30522 and lines[tokenizer.cls_token_id] == "[CLS]" and lines[7592] == "hello"
    assert (tmp_path / "tokenizer.json").is_file()
    from_vocabulary = BertWordPieceTokenizer(str(tmp_path / "vocab.txt"), lowercase=True)
    assert from_vocabulary.encode("Hello world").ids == tokenizer("Hello world")["input_ids"] == [101, 7592, 2088, 102]


def test_a_command_with_plain_training_arguments_is_a_programming_error(tmp_path):
    """Every command's training arguments carry ``--keep_checkpoints``, which ``train_and_report`` applies."""
    from transformers import TrainingArguments

    with pytest.raises(TypeError, match="TrainingArguments must derive from CompactBertTrainingArguments"):
        parse_arguments((TrainingArguments,), ["--output_dir", str(tmp_path)], "test", "")


@pytest.mark.parametrize("warmup", [["--warmup_ratio", "0.25"], ["--warmup_steps", "0.25"], ["--warmup_steps", "3"]])
def test_a_subclass_default_keeps_the_lines_warmup_type(tmp_path, warmup):
    (args,) = parse_arguments(
        (MiniMoEDistillationConfig,), ["--output_dir", str(tmp_path), "--max_steps", "8", *warmup], "test", ""
    )
    assert args.get_warmup_steps(8) == (3 if warmup[1] == "3" else 2)
    assert MiniMoEDistillationConfig(output_dir=str(tmp_path)).get_warmup_steps(200) == 5
