"""Same seed, same command → bitwise-identical weights: every command seeds before it builds a model."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from tests.distillation.cli_helpers import QUICK_DATA, QUIET, run_cli

TINY_SPARSE = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64, "num_hidden_layers": 2,
               "max_position_embeddings": 64}  # fmt: skip
SHORT = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--save_strategy", "no", *QUICK_DATA, *QUIET]


def _weights(folder):
    return load_file(str(folder / "model.safetensors"))


def _twice(tmp_path, arguments: list[str]) -> tuple[dict, dict]:
    runs = []
    for name in ("first", "second"):
        run_cli([*arguments, "--output_dir", str(tmp_path / name)])
        runs.append(_weights(tmp_path / name))
    return runs[0], runs[1]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    folder = tmp_path_factory.mktemp("teacher")
    overrides = json.dumps({**TINY_SPARSE, "num_experts": 1})
    run_cli(["pretrain", "--preset", "vanilla-bert-small", "--model_overrides", overrides, "--output_dir", str(folder),
             *SHORT])  # fmt: skip
    return folder


COMMANDS = {
    "pretrain": lambda teacher: ["pretrain", "--preset", "moe-bert-small", "--model_overrides",
                                 json.dumps({**TINY_SPARSE, "num_experts": 4}), *SHORT],
    "distill minimoe": lambda teacher: ["distill", "minimoe", "--student_overrides", json.dumps(TINY_SPARSE), *SHORT],
    "distill tcd": lambda teacher: ["distill", "tcd", "--teacher", str(teacher), "--student_overrides",
                                    json.dumps({**TINY_SPARSE, "num_experts": 4}), "--sampled_tokens", "64",
                                    "--token_group_size", "16", *SHORT],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_same_seed_same_weights(tmp_path, teacher, command):
    first, second = _twice(tmp_path, COMMANDS[command](teacher))
    assert first.keys() == second.keys()
    different = [name for name in first if not first[name].equal(second[name])]
    assert different == [], f"{command}: weights differ between two identical runs: {different[:5]}"
