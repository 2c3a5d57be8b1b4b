"""Same seed, same command → bitwise-identical weights: every command seeds before it builds a model."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from compact_bert.modeling import IBBertForPreTraining
from tests.distillation.cli_helpers import QUICK_DATA, QUIET, REPO_ROOT, run_cli
from tests.distillation.helpers import tiny_ib_bert_config, tiny_mobilebert_config

TINY_SPARSE = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
TRAINING = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--save_strategy", "no", *QUIET]
SHORT = [*TRAINING, *QUICK_DATA]
SST2_SLICE = REPO_ROOT / "finetuning" / "sst2_slice"
MOBILEBERT_STUDENT = {
    key: value
    for key, value in tiny_mobilebert_config().to_diff_dict().items()
    if key not in ("model_type", "transformers_version")
}


def _weights(folder):
    return load_file(str(folder / "model.safetensors"))


def _twice(tmp_path, arguments: list[str]) -> tuple[dict, dict]:
    runs = []
    for name in ("first", "second"):
        run_cli([*arguments, "--output_dir", str(tmp_path / name)])
        runs.append(_weights(tmp_path / name))
    return runs[0], runs[1]


@pytest.fixture(scope="module")
def teachers(tmp_path_factory):
    """A tiny pre-trained vanilla BERT (TCD's teacher) and a tiny IB-BERT with pre-training heads (MobileBERT's)."""
    folder = tmp_path_factory.mktemp("teachers")
    overrides = json.dumps({**TINY_SPARSE, "num_experts": 1})
    run_cli(
        [
            "pretrain",
            "--preset",
            "vanilla-bert-small",
            "--model_overrides",
            overrides,
            "--output_dir",
            str(folder / "vanilla"),
            *SHORT,
        ]
    )
    torch.manual_seed(0)
    IBBertForPreTraining(tiny_ib_bert_config()).save_pretrained(folder / "ib-bert")
    return folder


COMMANDS = {
    "pretrain": lambda teachers: [
        "pretrain",
        "--preset",
        "moe-bert-small",
        "--model_overrides",
        json.dumps({**TINY_SPARSE, "num_experts": 4}),
        *SHORT,
    ],
    "distill minimoe": lambda teachers: [
        "distill",
        "minimoe",
        "--student_overrides",
        json.dumps(TINY_SPARSE),
        "--finetune",
        "false",
        *SHORT,
    ],
    "distill tcd": lambda teachers: [
        "distill",
        "tcd",
        "--teacher",
        str(teachers / "vanilla"),
        "--student_overrides",
        json.dumps({**TINY_SPARSE, "num_experts": 4}),
        "--sampled_tokens",
        "64",
        "--token_group_size",
        "16",
        *SHORT,
    ],
    "distill mobilebert": lambda teachers: [
        "distill",
        "mobilebert",
        "--teacher",
        str(teachers / "ib-bert"),
        "--student_overrides",
        json.dumps(MOBILEBERT_STUDENT),
        "--strategy",
        "pkt",
        "--steps_per_stage",
        "1",
        *SHORT,
    ],
    "finetune": lambda teachers: [
        "finetune",
        "--model_name_or_path",
        "minimoe-4l-192h",
        "--model_overrides",
        json.dumps(TINY_SPARSE),
        "--train_file",
        str(SST2_SLICE / "train.tsv"),
        "--validation_file",
        str(SST2_SLICE / "validation.tsv"),
        "--max_seq_length",
        "32",
        "--eval_strategy",
        "no",
        "--load_best_model_at_end",
        "false",
        *TRAINING,
    ],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_same_seed_same_weights(tmp_path, teachers, command):
    first, second = _twice(tmp_path, COMMANDS[command](teachers))
    assert first.keys() == second.keys()
    different = [name for name in first if not first[name].equal(second[name])]
    assert different == [], f"{command}: weights differ between two identical runs: {different[:5]}"
