"""Crash-safe checkpoints: every checkpoint carries a manifest, ``--resume_from_checkpoint last`` resumes from the
newest complete one, and a checkpoint that cannot be resumed is refused before training, with the reason."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest
import torch
import transformers
from transformers import Trainer, TrainerCallback, TrainingArguments

from compact_bert.jobs.run_report import train_and_report
from compact_bert.modeling import MoEBertForMaskedLM
from compact_bert.training.checkpoints import (
    MANIFEST_NAME,
    checkpoint_problem,
    resolve_resume_checkpoint,
    run_identity,
)
from tests.conftest import VOCAB_SIZE, tiny_configs
from tests.distillation.cli_helpers import (
    QUICK_DATA,
    QUIET,
    kill_when_path_exists,
    refusal_in_this_process,
    run_cli,
)
from tests.log_records import recorded_messages

TINY_DENSE = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_experts": 1,
    "max_position_embeddings": 64,
}


def _pretrain(output, steps: int, *extra, **overrides) -> list[str]:
    return [
        "pretrain",
        "--preset",
        "vanilla-bert-small",
        "--model_overrides",
        json.dumps({**TINY_DENSE, **overrides}),
        "--output_dir",
        str(output),
        "--max_steps",
        str(steps),
        "--save_steps",
        "1",
        "--logging_steps",
        "1",
        "--per_device_train_batch_size",
        "4",
        *QUICK_DATA,
        *QUIET,
        *extra,
    ]


def _run_failing(arguments: list[str]) -> str:
    """The refusal's message; a refusal is an exit with a message, never an exception (a user's traceback)."""
    return refusal_in_this_process(arguments)


def _trained_steps(checkpoint) -> set[int]:
    history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    return {entry["step"] for entry in history if "loss" in entry and "eval_loss" not in entry}


@pytest.fixture(scope="module")
def three_checkpoints(tmp_path_factory):
    """A finished 3-step pre-training run with a checkpoint after every step, kept after the run."""
    output = tmp_path_factory.mktemp("pretrained") / "run"
    run_cli(_pretrain(output, 3, "--keep_checkpoints", "true"))
    return output


@pytest.fixture
def run_copy(three_checkpoints, tmp_path):
    return shutil.copytree(three_checkpoints, tmp_path / "run")


def test_every_checkpoint_has_a_manifest_that_matches_its_files(three_checkpoints):
    for step in (1, 2, 3):
        folder = three_checkpoints / f"checkpoint-{step}"
        manifest = json.loads((folder / MANIFEST_NAME).read_text())
        on_disk = {
            path.relative_to(folder).as_posix(): path
            for path in folder.rglob("*")
            if path.is_file() and path.name != MANIFEST_NAME
        }
        assert set(manifest["files"]) == set(on_disk)
        assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= set(on_disk)
        for name, path in on_disk.items():
            data = path.read_bytes()
            assert manifest["files"][name] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}, name
        assert manifest["global_step"] == step and manifest["training_method"] == "PretrainingTrainer"
        assert manifest["model_class"] == "MoEBertForMaskedLM" and manifest["model_config"]["num_experts"] == 1
        assert checkpoint_problem(folder) is None


def test_final_model_folder_has_no_training_arguments_pickle_and_loads(three_checkpoints):
    assert not (three_checkpoints / "training_args.bin").exists()
    assert not (three_checkpoints / MANIFEST_NAME).exists()
    model = transformers.AutoModelForMaskedLM.from_pretrained(three_checkpoints)
    assert isinstance(model, MoEBertForMaskedLM) and model.config.num_experts == 1


def _damage(run, damage: str):
    """Damage the newest checkpoint (step 3) of a copied run as ``damage`` says; returns that checkpoint."""
    newest = run / "checkpoint-3"
    if damage.startswith("truncate"):
        damaged = newest / ("model.safetensors" if damage == "truncate_weights" else "optimizer.pt")
        os.truncate(damaged, damaged.stat().st_size // 2)
    else:
        (newest / "trainer_state.json").unlink()
    return newest


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("truncate_weights", "model.safetensors has"),
        ("truncate_optimizer", "optimizer.pt has"),
        ("delete_trainer_state", "trainer_state.json is missing"),
    ],
)
def test_last_skips_a_damaged_newest_checkpoint_naming_the_reason(run_copy, damage, reason):
    """What ``--resume_from_checkpoint last`` chooses, in this process; the command's own run is tested below."""
    newest = _damage(run_copy, damage)
    manifest = json.loads((run_copy / "checkpoint-2" / MANIFEST_NAME).read_text())
    identity = {key: manifest[key] for key in ("training_method", "model_class", "model_config")}
    with recorded_messages("compact_bert") as messages:
        chosen = resolve_resume_checkpoint(run_copy, "last", identity, 4)
    assert chosen == str(run_copy / "checkpoint-2")
    assert any(message.startswith(f"Not resuming from {newest}: {reason}") for message in messages), messages


def test_last_resumes_from_the_newest_complete_checkpoint(run_copy):
    """The command, with a truncated newest checkpoint: it says why it skips it, resumes from the one before and
    trains every step, rewriting the damaged checkpoint complete."""
    newest = _damage(run_copy, "truncate_weights")
    result = run_cli(_pretrain(run_copy, 4, "--resume_from_checkpoint", "last", "--keep_checkpoints", "true"))
    assert f"Not resuming from {newest}: model.safetensors has" in result.stdout
    assert f"Resuming from {run_copy / 'checkpoint-2'}" in result.stdout
    assert json.loads((run_copy / "run_summary.json").read_text())["optimizer_steps"] == 4
    assert _trained_steps(run_copy / "checkpoint-4") == {1, 2, 3, 4}
    assert checkpoint_problem(newest) is None  # step 3 trained again and its checkpoint rewritten complete


def test_an_incomplete_checkpoint_named_explicitly_is_refused(run_copy):
    weights = run_copy / "checkpoint-3" / "model.safetensors"
    os.truncate(weights, 100)
    output = _run_failing(_pretrain(run_copy, 5, "--resume_from_checkpoint", str(run_copy / "checkpoint-3")))
    assert "is not a complete checkpoint: model.safetensors has 100 bytes" in output
    assert "Traceback" not in output


def test_resuming_at_or_past_max_steps_is_refused(run_copy):
    output = _run_failing(_pretrain(run_copy, 2, "--resume_from_checkpoint", "last"))
    assert "checkpoint-3 is at step 3, which is not below --max_steps 2" in output
    assert not (run_copy / "checkpoint-4").exists() and "Traceback" not in output


def test_resuming_another_model_shape_is_refused(run_copy):
    output = _run_failing(_pretrain(run_copy, 5, "--resume_from_checkpoint", "last", num_experts=4))
    assert "num_experts: checkpoint 1, this run 4" in output and "Traceback" not in output


def test_resuming_another_methods_checkpoint_is_refused(run_copy, three_checkpoints):
    student = json.dumps({**TINY_DENSE, "num_experts": 4})
    output = _run_failing(
        [
            "distill",
            "tcd",
            "--teacher",
            str(three_checkpoints),
            "--student_overrides",
            student,
            "--output_dir",
            str(run_copy),
            "--max_steps",
            "5",
            "--per_device_train_batch_size",
            "8",
            "--sampled_tokens",
            "128",
            "--token_group_size",
            "32",
            "--resume_from_checkpoint",
            "last",
            *QUICK_DATA,
            *QUIET,
        ]
    )
    assert "trainer (method): checkpoint PretrainingTrainer, this run TransferCapabilityDistillationTrainer" in output
    assert "num_experts: checkpoint 1, this run 4" in output and "Traceback" not in output


def test_sigkill_while_a_checkpoint_is_written_then_last_completes(tmp_path):
    """Killed the moment a checkpoint folder appears (while Trainer is writing it), the run resumes from the
    newest complete checkpoint, trains every step and rotates down to the newest complete checkpoints."""
    output = tmp_path / "run"
    arguments = _pretrain(output, 12, "--save_total_limit", "2", "--keep_checkpoints", "true")
    kill_when_path_exists(arguments, output / "checkpoint-4", poll_seconds=0.001)
    assert not (output / "run_summary.json").exists()
    result = run_cli([*arguments, "--resume_from_checkpoint", "last"])
    assert "Resuming from" in result.stdout
    assert json.loads((output / "run_summary.json").read_text())["optimizer_steps"] == 12
    assert _trained_steps(output / "checkpoint-12") == set(range(1, 13))
    remaining = sorted(path.name for path in output.glob("checkpoint-*"))
    assert remaining == ["checkpoint-11", "checkpoint-12"]
    assert all(checkpoint_problem(output / name) is None for name in remaining)


class _CrashInSave(TrainerCallback):
    """Fails after Trainer has written checkpoint-2 but before its manifest: a kill at the worst moment."""

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == 2:
            raise RuntimeError("simulated crash while saving checkpoint-2")


def test_rotation_never_deletes_the_last_complete_checkpoint(tmp_path):
    """With save_total_limit=1 Trainer alone deletes checkpoint-1 inside the save of checkpoint-2, before anyone
    could mark checkpoint-2 complete; here checkpoint-1 survives until checkpoint-2 is complete."""
    generator = torch.Generator().manual_seed(0)
    rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(1, VOCAB_SIZE, (8, 12), generator=generator)]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=3,
        save_steps=1,
        save_total_limit=1,
        use_cpu=True,
        per_device_train_batch_size=2,
        report_to="none",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=MoEBertForMaskedLM(tiny_configs()["vanilla_bert"]),
        args=args,
        train_dataset=rows,
        callbacks=[_CrashInSave()],
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        train_and_report(trainer, None, args)
    assert args.save_total_limit == 1  # given back after the failed run
    assert checkpoint_problem(tmp_path / "checkpoint-1") is None
    assert "no compact_bert_manifest.json" in checkpoint_problem(tmp_path / "checkpoint-2")
    chosen = resolve_resume_checkpoint(tmp_path, "last", run_identity(trainer), max_steps=3)
    assert chosen == str(tmp_path / "checkpoint-1")


def test_a_run_stopped_during_its_final_save_is_completed_by_resuming(tmp_path):
    """Killed while writing the final model (after the last checkpoint, before the summary), the folder held
    partial files and `--resume_from_checkpoint last` could only refuse ('nothing is left to train'); now it
    trains nothing and completes the save from the last checkpoint."""
    from safetensors.torch import load_file

    output = tmp_path / "run"
    run_cli(_pretrain(output, 2, "--keep_checkpoints", "true"))
    expected = load_file(output / "checkpoint-2" / "model.safetensors")
    for name in ("run_summary.json", "README.md", "model.safetensors", "tokenizer.json", "config.json"):
        (output / name).unlink()
    result = run_cli(_pretrain(output, 2, "--resume_from_checkpoint", "last"))
    assert "but the run's final save did not finish: completing it" in result.stdout + result.stderr
    summary = json.loads((output / "run_summary.json").read_text())
    assert (
        summary["optimizer_steps"] == 2 and (output / "README.md").is_file() and (output / "tokenizer.json").is_file()
    )
    completed = load_file(output / "model.safetensors")
    assert all(torch.equal(completed[name], tensor) for name, tensor in expected.items())
    assert not list(output.glob("checkpoint-*")), "the completed run removes its checkpoints like any finished run"
