"""The capacity-remedies recipe (``examples/capacity_remedies.py``): what it reads from a run's log."""

from __future__ import annotations

import json

import pytest

from examples.capacity_remedies import REMEDIES, routing_log


def test_routing_numbers_are_the_worst_block_of_the_runs_own_log(tmp_path):
    log = [
        {
            "loss": 1.0,
            "block0_dropped_fraction": "0.39",
            "block1_dropped_fraction": "0.1",
            "block0_max_expert_share": "0.74",
            "block1_max_expert_share": "0.3",
            "step": 10,
        },
        {
            "loss": 0.8,
            "block0_dropped_fraction": "0.05",
            "block1_dropped_fraction": "0.21",
            "block0_max_expert_share": "0.4",
            "block1_max_expert_share": "0.35",
            "step": 20,
        },
        # the final evaluation logs its own routing numbers (no capacity limit there): not training's
        {"eval_accuracy": 0.8, "eval_block0_dropped_fraction": 0.9, "eval_block0_max_expert_share": 0.99, "step": 20},
    ]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": log}))
    assert routing_log(tmp_path) == pytest.approx(
        {"first_max_expert_share": 0.74, "first_dropped_fraction": 0.39, "mean_dropped_fraction": (0.39 + 0.21) / 2}
    )


def test_every_remedy_is_a_capacity_choice_with_or_without_rebalancing():
    assert [flags[1] for flags in REMEDIES.values()] == ["checkpoint", "none", "checkpoint", "none"]
    assert ["--rebalance_routers" in flags for flags in REMEDIES.values()] == [False, False, True, True]
