"""A run killed at any point (also while a checkpoint is being written) and resumed with
``--resume_from_checkpoint last`` ends with exactly the weights of the uninterrupted run, on CPU.

Each command's randomness is covered: data order (Trainer's seeded sampler, consumed batches skipped on resume),
MLM masks and NSP pairs (drawn per optimizer step, ``training/step_randomness.py``), dropout (seeded per
micro-batch) and TCD's sampled token groups (``step_generator``). Before these were drawn from the step, the final
weights of a resumed run differed from the uninterrupted run's by 0.003-0.022. ``finetune`` draws only dropout, from
the global random state that Trainer saves with each checkpoint and restores on resume; nothing else draws from it
(its collator only pads), so it needs no step seeding - the test keeps it that way.

Two runs of one command with one seed, one of them killed and resumed, ending bitwise equal also proves that these
commands are reproducible: an unseeded draw before or after the kill would make them differ.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainingArguments

from compact_bert.distillation.data import PretrainingCollator
from compact_bert.distillation.trainer_utils import PretrainingTrainer
from compact_bert.modeling import CompactMobileBertForPreTraining, IBBertForPreTraining
from compact_bert.training.checkpoints import MANIFEST_NAME
from compact_bert.training.step_randomness import draw_training_targets, run_seed
from tests.distillation.cli_helpers import (
    QUICK_DATA,
    QUIET,
    REPO_ROOT,
    cli_command,
    environment,
    run_cli,
    run_in_this_process,
    stage_steps,
)
from tests.distillation.helpers import held_out_blocks, tiny_ib_bert_config, tiny_mobilebert_config, tokenizer

STEPS = 6
SST2_SLICE = REPO_ROOT / "finetuning" / "sst2_slice"
TINY_BERT = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
TINY_MINIMOE = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
MOBILEBERT_STUDENT = {
    key: value
    for key, value in tiny_mobilebert_config().to_diff_dict().items()
    if key not in ("model_type", "transformers_version")
}
TRAINING = [
    "--max_steps",
    str(STEPS),
    "--save_steps",
    "1",
    "--logging_steps",
    "1",
    "--per_device_train_batch_size",
    "4",
    "--learning_rate",
    "1e-3",
    *QUIET,
]


def _pretraining_trainer(output, accumulation: int) -> PretrainingTrainer:
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=str(output),
        max_steps=4,
        save_steps=2,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=accumulation,
        learning_rate=1e-3,
        use_cpu=True,
        seed=0,
        report_to="none",
        disable_tqdm=True,
    )
    return PretrainingTrainer(
        model=CompactMobileBertForPreTraining(tiny_mobilebert_config()),
        args=args,
        train_dataset=held_out_blocks(True),
        eval_dataset=held_out_blocks(True, 16),
        data_collator=PretrainingCollator(tokenizer(), 0.15, next_sentence_prediction=True),
    )


@pytest.mark.parametrize("accumulation", [1, 2])
def test_resumed_trainer_continues_the_same_run(tmp_path, accumulation):
    """In one process (quick): a trainer resumed from the step-2 checkpoint of a 4-step run - with the global random
    state elsewhere - ends with the same weights, and evaluating twice gives the same loss."""
    uninterrupted = _pretraining_trainer(tmp_path / "uninterrupted", accumulation)
    uninterrupted.train()
    resumed = _pretraining_trainer(tmp_path / "resumed", accumulation)
    torch.rand(7)
    resumed.train(resume_from_checkpoint=str(tmp_path / "uninterrupted" / "checkpoint-2"))
    _assert_bitwise_equal(resumed.model.state_dict(), uninterrupted.model.state_dict())
    losses = {uninterrupted.evaluate()["eval_loss"], resumed.evaluate()["eval_loss"], resumed.evaluate()["eval_loss"]}
    assert len(losses) == 1


def _drawn_labels(process_index: int, step: int, micro_batch: int) -> torch.Tensor:
    """The masks the trainer draws for this micro-batch (what it reads of a run: the seed and the process)."""
    args = SimpleNamespace(seed=0, process_index=process_index)
    collator = PretrainingCollator(tokenizer(), 0.15, next_sentence_prediction=True)
    batch = collator([{"input_ids": list(range(1000, 1061))} for _ in range(8)])
    return draw_training_targets(collator, batch, run_seed(args, "training targets", step, micro_batch))["labels"]


def test_masks_depend_on_step_micro_batch_and_process_only():
    """The same (step, micro-batch, process) always draws the same masks, whatever the global random state; every
    other micro-batch, step or process draws its own (two processes must not mask their shards alike)."""
    reference = _drawn_labels(0, 5, 0)
    torch.rand(3)
    assert torch.equal(_drawn_labels(0, 5, 0), reference)
    for other in (_drawn_labels(1, 5, 0), _drawn_labels(0, 5, 1), _drawn_labels(0, 6, 0)):
        assert not torch.equal(other, reference)


@pytest.fixture(scope="module")
def teachers(tmp_path_factory):
    """A tiny vanilla BERT masked LM (TCD's teacher) and a tiny IB-BERT with its pre-training heads (MobileBERT's)."""
    folder = tmp_path_factory.mktemp("teachers")
    run_in_this_process(
        [
            "pretrain",
            "--preset",
            "vanilla-bert-small",
            "--model_overrides",
            json.dumps({**TINY_BERT, "num_experts": 1}),
            "--output_dir",
            str(folder / "vanilla"),
            "--max_steps",
            "1",
            "--per_device_train_batch_size",
            "4",
            *QUICK_DATA,
            *QUIET,
        ]
    )
    torch.manual_seed(0)
    IBBertForPreTraining(tiny_ib_bert_config()).save_pretrained(folder / "ib-bert")
    return folder


def _command(name: str, teachers, output) -> list[str]:
    common = ["--output_dir", str(output), *TRAINING, *QUICK_DATA]
    if name == "pretrain":  # MLM + NSP on a bottleneck model with both heads
        return [
            "pretrain",
            "--preset",
            "ib-bert-large",
            "--model_overrides",
            json.dumps(
                {
                    key: value
                    for key, value in tiny_ib_bert_config().to_diff_dict().items()
                    if key not in ("model_type", "transformers_version")
                }
            ),
            *common,
        ]
    if name == "tcd":  # MLM + sampled token groups, MoE student
        return [
            "distill",
            "tcd",
            "--teacher",
            str(teachers / "vanilla"),
            "--student_overrides",
            json.dumps({**TINY_BERT, "num_experts": 4}),
            "--sampled_tokens",
            "64",
            "--token_group_size",
            "32",
            *common,
        ]
    if name == "mobilebert":  # layer-wise stages of 2 steps, then pre-training distillation (MLM + NSP targets)
        return [
            "distill",
            "mobilebert",
            "--teacher",
            str(teachers / "ib-bert"),
            "--student_overrides",
            json.dumps(MOBILEBERT_STUDENT),
            "--strategy",
            "pkt",
            "--steps_per_stage",
            "2",
            *common,
        ]
    if name == "minimoe":  # masked inputs (no MLM loss), relation loss, MoE student
        return ["distill", "minimoe", "--student_overrides", json.dumps(TINY_MINIMOE), "--finetune", "false", *common]
    if name == "finetune":  # dropout only, on the bundled SST-2 slice; a fresh tiny MiniMoE with a task head
        return [
            "finetune",
            "--model_name_or_path",
            "minimoe-4l-192h",
            "--model_overrides",
            json.dumps(TINY_MINIMOE),
            "--train_file",
            str(SST2_SLICE / "train.tsv"),
            "--validation_file",
            str(SST2_SLICE / "validation.tsv"),
            "--max_seq_length",
            "32",
            "--save_strategy",
            "steps",
            "--eval_strategy",
            "no",
            "--load_best_model_at_end",
            "false",
            "--output_dir",
            str(output),
            *TRAINING,
        ]
    raise ValueError(name)


def _kill_when_exists(arguments: list[str], path, timeout: float = 300) -> None:
    """Start the CLI and SIGKILL it the moment ``path`` exists: a checkpoint folder (usually while Trainer is still
    writing it) or a checkpoint's manifest (once it is complete)."""
    process = subprocess.Popen(
        cli_command(arguments), env=environment(), cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + timeout
    while not path.exists():
        assert process.poll() is None, f"the run ended before {path} appeared"
        assert time.time() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.001)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def _final_weights(output) -> dict[str, torch.Tensor]:
    return load_file(output / "model.safetensors")


def _assert_bitwise_equal(resumed: dict, uninterrupted: dict) -> None:
    assert resumed.keys() == uninterrupted.keys()
    different = {
        name: float((resumed[name].double() - tensor.double()).abs().max())
        for name, tensor in uninterrupted.items()
        if not torch.equal(resumed[name], tensor)
    }
    assert not different, f"tensors that differ from the uninterrupted run (max |difference|): {different}"


def _check_kill_and_resume_equals_uninterrupted(name, teachers, tmp_path, kill_at: list, *extra) -> None:
    """``kill_at``: a step N kills the run as ``checkpoint-N`` appears (``last`` then resumes from N - 1, or from N
    when the kill came after its save); ``(N, "complete")`` kills it once ``checkpoint-N`` is complete."""
    uninterrupted = tmp_path / "uninterrupted"
    run_cli(_command(name, teachers, uninterrupted) + list(extra))
    interrupted = tmp_path / "interrupted"
    arguments = _command(name, teachers, interrupted) + list(extra)
    first_kill = True
    for kill in kill_at:
        step, when = kill if isinstance(kill, tuple) else (kill, "appears")
        folder = interrupted / f"checkpoint-{step}"
        _kill_when_exists(
            arguments + ([] if first_kill else ["--resume_from_checkpoint", "last"]),
            folder / MANIFEST_NAME if when == "complete" else folder,
        )
        first_kill = False
        assert not (interrupted / "run_summary.json").exists()
    result = run_cli([*arguments, "--resume_from_checkpoint", "last", "--keep_checkpoints", "true"])
    assert "Resuming from" in result.stdout
    _assert_bitwise_equal(_final_weights(interrupted), _final_weights(uninterrupted))
    history = json.loads((interrupted / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())["log_history"]
    trained_steps = {entry["step"] for entry in history if "loss" in entry and "eval_loss" not in entry}
    assert trained_steps == set(range(1, STEPS + 1)), "the resumed run's log misses or repeats steps"
    summaries = [json.loads((folder / "run_summary.json").read_text()) for folder in (uninterrupted, interrupted)]
    assert summaries[1]["optimizer_steps"] == summaries[0]["optimizer_steps"] == STEPS
    evaluated = {
        key: value
        for key, value in summaries[0].items()
        if key.startswith("eval_") and "runtime" not in key and "per_second" not in key
    }
    assert evaluated and evaluated == {key: summaries[1][key] for key in evaluated}  # evaluation masks are fixed too


@pytest.mark.parametrize(
    ("name", "kill_at"),
    [
        ("tcd", [3]),
        # Stages of 2 steps: resumed from checkpoint-3, inside the second stage, then killed in the last stage.
        ("mobilebert", [(3, "complete"), 5]),
        ("minimoe", [4]),
        ("finetune", [3]),
    ],
)
def test_kill_and_resume_ends_bitwise_equal_to_the_uninterrupted_run(name, kill_at, teachers, tmp_path):
    _check_kill_and_resume_equals_uninterrupted(name, teachers, tmp_path, kill_at)
    if name == "mobilebert":  # a resume inside a stage finishes that stage, not a new one
        assert stage_steps(tmp_path / "interrupted" / f"checkpoint-{STEPS}") == {0: 2, 1: 2, 2: 2}


def test_kill_and_resume_of_pretraining_with_gradient_accumulation(teachers, tmp_path):
    """Pre-training (MLM + NSP) with two micro-batches per step, killed twice: each micro-batch draws its own masks
    and dropout, also after a resume. (The other commands are killed at one micro-batch per step above.)"""
    _check_kill_and_resume_equals_uninterrupted(
        "pretrain", teachers, tmp_path, [2, 4], "--gradient_accumulation_steps", "2"
    )
