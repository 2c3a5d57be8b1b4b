"""The recipes' fine-tuning stage (``examples/downstream.py``): data checks, seeds, reported values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from examples.downstream import (
    TASKS,
    check_data_dir,
    finetune_seeds,
    mean_and_spread,
    write_results,
)
from tests.conftest import shared_data


def test_mean_and_spread_is_the_sample_standard_deviation_in_percent():
    assert mean_and_spread([0.781, 0.7901]) == "78.6 ± 0.6"  # the README's MiniMoE SST-2 cell
    assert mean_and_spread([0.5]) == "50.0 ± 0.0"


def test_missing_data_is_named_before_any_training(tmp_path):
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "train.tsv").write_text("sentence\tlabel\nfine\t1\n")
    with pytest.raises(SystemExit, match=r"--data_dir: missing .*sst2/validation\.tsv, .*conll2003/train\.txt"):
        check_data_dir(tmp_path, list(TASKS))


def test_each_seed_is_one_finetune_run_on_the_shared_data(tmp_path):
    data_dir = shared_data("sst2").parent
    quick = ("--max_train_samples", "32", "--max_eval_samples", "48", "--num_train_epochs", "1")
    result = finetune_seeds(Path("minilm-3l-96h"), "sst2", data_dir, tmp_path / "runs", [0, 1], quick)
    summaries = [json.loads((tmp_path / "runs" / f"seed-{seed}" / "run_summary.json").read_text()) for seed in (0, 1)]
    assert result["values"] == [summary["eval_accuracy"] for summary in summaries]
    assert [summary["seed"] for summary in summaries] == [0, 1]
    write_results(tmp_path / "report", "| a |", {"values": result["values"]})
    assert (tmp_path / "report" / "results.md").read_text() == "| a |\n"
    assert json.loads((tmp_path / "report" / "results.json").read_text()) == {"values": result["values"]}
