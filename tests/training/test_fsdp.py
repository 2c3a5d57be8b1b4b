"""FSDP2 through Accelerate, on two CPU processes (gloo): a distillation method with its frozen teacher sharded, and
``finetune``'s trainer, each checkpointed and resumed, against the same runs unsharded in one process.

One ``accelerate launch`` runs ``fsdp_script.py`` (both runs, then both resumed from their step-3 checkpoint); this
process runs the unsharded twins (``fsdp_runs``: same seed, weights and micro-batches) and compares losses, the
evaluation loss and the saved models. The distillation run keeps sharded checkpoints (``SHARDED_STATE_DICT``, the
``accelerate config`` default), the fine-tunes whole ones (``FULL_STATE_DICT``): all must resume, and all must end
with a whole model that ``from_pretrained`` loads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from compact_bert.modeling import MiniMoEModel
from tests.distillation.cli_helpers import REPO_ROOT, accelerate_launch, environment, run_cli
from tests.distillation.test_minimoe_tcd_cli import _minimoe
from tests.training.fsdp_runs import (
    SAVE_STEPS,
    STEPS,
    distillation_trainer,
    finetune_trainer,
    masked_lm_trainer,
    train_losses,
)

SCRIPT = Path(__file__).with_name("fsdp_script.py")
RUNS = {
    "distillation": (distillation_trainer, AutoModel),
    "finetune": (finetune_trainer, AutoModelForSequenceClassification),
    "masked_lm": (masked_lm_trainer, AutoModelForMaskedLM),
}


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> dict:
    output = tmp_path_factory.mktemp("fsdp")
    command = accelerate_launch(2, str(SCRIPT), str(output))
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment(), cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return json.loads((output / "fsdp.json").read_text())


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory) -> dict:
    results = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each launched process (OMP_NUM_THREADS=1): the same summation order
    try:
        for name, (build, _) in RUNS.items():
            results[name] = _unsharded_run(build, str(tmp_path_factory.mktemp(name)))
    finally:
        torch.set_num_threads(threads)
    return results


def _unsharded_run(build, output_dir: str) -> dict:
    trainer = build(output_dir, sharded=False)
    trainer.train()
    return {
        "losses": train_losses(trainer),
        "eval_loss": trainer.evaluate()["eval_loss"],
        "weights": {key: value.clone() for key, value in trainer.model.state_dict().items()},
    }


@pytest.mark.parametrize("name", list(RUNS))
def test_sharded_training_gives_the_unsharded_losses(name, sharded, unsharded):
    run = sharded[name]
    assert run["distributed_type"] == "DistributedType.FSDP" and run["steps_taken"] == STEPS
    losses = {int(step): loss for step, loss in run["losses"].items()}
    assert sorted(losses) == list(range(1, STEPS + 1))
    for step, loss in unsharded[name]["losses"].items():
        # transformers 4.57 logs the training loss rounded to 4 decimals (trainer.py ``round(..., 4)``): losses equal
        # within float tolerance can straddle a rounding boundary and log one unit (1e-4) apart.
        assert losses[step] == pytest.approx(loss, rel=1e-5, abs=1.5e-4), f"step {step}"
    assert run["eval_loss"] == pytest.approx(unsharded[name]["eval_loss"], rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("name", list(RUNS))
def test_a_resumed_sharded_run_continues_the_same_run(name, sharded, unsharded):
    resumed, uninterrupted = sharded[f"{name}_resumed"], sharded[name]
    assert resumed["steps_taken"] == STEPS - SAVE_STEPS  # it resumed: only the steps after its checkpoint
    for step in range(SAVE_STEPS + 1, STEPS + 1):
        assert resumed["losses"][str(step)] == pytest.approx(uninterrupted["losses"][str(step)], rel=1e-6, abs=1e-8)
    assert resumed["eval_loss"] == pytest.approx(uninterrupted["eval_loss"], rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("name", list(RUNS))
def test_the_finished_model_is_saved_whole_and_loads(name, sharded, unsharded):
    _, auto_class = RUNS[name]
    expected = unsharded[name]["weights"]
    for run in (sharded[name], sharded[f"{name}_resumed"]):
        folder = Path(run["final"])
        assert (folder / "model.safetensors").is_file()
        # The family's own code files and class names, not those of FSDP2's ``FSDP<Name>`` wrapper class.
        config = json.loads((folder / "config.json").read_text())
        model_type = config["model_type"]
        assert sorted(path.name for path in folder.glob("*.py")) == [
            f"configuration_{model_type}.py",
            f"modeling_{model_type}.py",
        ]
        assert not [name for name in [*config["architectures"], *config["auto_map"].values()] if "FSDP" in name]
        loaded = auto_class.from_pretrained(folder).state_dict()
        assert set(loaded) == set(expected)
        for key, tensor in expected.items():
            torch.testing.assert_close(loaded[key], tensor, rtol=1e-5, atol=1e-6, msg=key)


def test_the_teacher_is_sharded_frozen_and_unchanged(sharded):
    for run in (sharded["distillation"], sharded["distillation_resumed"]):
        teacher = run["teacher"]
        assert teacher["sharded_parameters"] == teacher["parameters"]  # every parameter a DTensor shard
        assert teacher["local_elements"] * 2 <= teacher["elements"] + 64  # each process holds about half
        assert teacher["frozen_in_evaluation_mode"] and teacher["unchanged"]


def test_the_distill_command_shards_on_two_cpu_processes(tmp_path):
    """The user's route: ``accelerate launch … compact-bert distill minimoe --fsdp … --use_cpu true``, with the
    packaged pretrained teacher sharded beside the student, sharded checkpoints and a whole final model."""
    config = tmp_path / "fsdp.json"
    config.write_text(json.dumps({"version": 2, "state_dict_type": "SHARDED_STATE_DICT", "sync_module_states": False}))
    output = tmp_path / "student"
    # On the command line both lines take the strategy (5.x reads "true" as an unknown option string).
    flags = [
        "--fsdp",
        "full_shard",
        "--fsdp_config",
        str(config),
        "--use_cpu",
        "true",
        "--keep_checkpoints",
        "true",
    ]
    run_cli(_minimoe(output, 4, *flags), processes=2)
    summary = json.loads((output / "run_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["optimizer_steps"] == 4
    assert (output / "checkpoint-4" / "pytorch_model_fsdp_0").is_dir()  # FSDP's sharded checkpoint, not DDP's
    assert isinstance(AutoModel.from_pretrained(output), MiniMoEModel)


FSDP_WITHOUT_A_DEVICE = """
import transformers
from transformers import TrainingArguments
from compact_bert.finetuning.finetune_trainer import FinetuneTrainer
from fsdp_runs import minimoe_model, FSDP
from compact_bert.modeling import MiniMoEForSequenceClassification
arguments = TrainingArguments(output_dir=OUTPUT, use_cpu=True, fsdp=FSDP, fsdp_config={"version": 2}, report_to="none")
FinetuneTrainer(model=minimoe_model(0, MiniMoEForSequenceClassification), args=arguments)
"""


def test_fsdp_on_cpu_without_a_device_to_sync_from_names_the_setting(tmp_path):
    """On 4.57 Accelerate refuses the plugin deep inside ``Trainer`` ("no available devices found"); the message
    must name the setting to change. 5.x refuses FSDP in one process with its own clear message. Run in a process of
    its own: transformers 4.57 writes ``--fsdp`` into the environment."""
    script = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); OUTPUT = {str(tmp_path)!r}\n"
    result = subprocess.run(
        [sys.executable, "-c", script + FSDP_WITHOUT_A_DEVICE],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment(),
        cwd=REPO_ROOT,
    )
    assert result.returncode != 0
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert "Using fsdp only works in distributed training" in result.stderr, result.stderr[-2000:]
    else:
        assert '"sync_module_states": false to --fsdp_config' in result.stderr, result.stderr[-2000:]
