"""Same seed, same command → bitwise-identical weights: every command seeds before it builds a model.

The distillation methods and ``finetune`` are proven reproducible by ``tests/reliability/test_bitwise_resume.py``,
where two runs with one seed (one of them killed and resumed) must end bitwise equal. Pre-training runs there on
the bottleneck architecture; the MoE preset, with its routers and experts, is run twice here.
"""

from __future__ import annotations

import json

from safetensors.torch import load_file

from tests.distillation.cli_helpers import QUICK_DATA, QUIET, run_cli

TINY_SPARSE = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
SHORT = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--save_strategy", "no", *QUIET, *QUICK_DATA]


def test_moe_pretraining_with_one_seed_twice_gives_the_same_weights(tmp_path):
    arguments = [
        "pretrain",
        "--preset",
        "moe-bert-small",
        "--model_overrides",
        json.dumps({**TINY_SPARSE, "num_experts": 4}),
        *SHORT,
    ]
    for name in ("first", "second"):
        run_cli([*arguments, "--output_dir", str(tmp_path / name)])
    first, second = (load_file(str(tmp_path / name / "model.safetensors")) for name in ("first", "second"))
    assert first.keys() == second.keys()
    different = [name for name in first if not first[name].equal(second[name])]
    assert different == [], f"weights differ between two identical runs: {different[:5]}"
