"""One short console line per logging step (``training/console_log.py``); the full logs stay on disk."""

from __future__ import annotations

import json

import pytest

from compact_bert.cli import finetune_command
from compact_bert.training.console_log import VERBOSE_VARIABLE, concise_line
from tests.conftest import shared_data


def test_routing_numbers_are_summarised_over_blocks():
    logs = {
        "loss": "0.57",
        "learning_rate": 1.304e-05,
        "epoch": 2.66,
        "block0_max_expert_share": "0.3651",
        "block0_min_expert_share": "0.1573",
        "block0_dropped_fraction": "0",
        "block1_max_expert_share": 0.41,
        "block1_min_expert_share": 0.1,
        "block1_dropped_fraction": 0.02,
        "total_flos": 1e12,
    }
    assert concise_line(logs, 250, 282) == (
        "step 250/282 (epoch 2.66) | loss 0.57 | learning_rate 1.3e-05 | experts (2 blocks): share 0.10-0.41, dropped 2%"
    )


def _finetune(tmp_path) -> None:
    data = shared_data("sst2")
    arguments = [
        "--model_name_or_path",
        "minimoe-3l-96h",
        "--task_name",
        "sst2",
        "--train_file",
        str(data / "train.tsv"),
        "--max_train_samples",
        "32",
        "--per_device_train_batch_size",
        "8",
        "--num_train_epochs",
        "1",
        "--logging_strategy",
        "steps",
        "--logging_steps",
        "1",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--init_from_teacher",
        "none",
        "--output_dir",
        str(tmp_path / "run"),
    ]
    finetune_command.finetune_from_flags(arguments)


def test_a_moe_run_prints_short_lines_and_keeps_every_number_in_its_state(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(VERBOSE_VARIABLE, raising=False)
    _finetune(tmp_path)
    printed = capsys.readouterr().out.splitlines()
    lines = [line for line in printed if line.startswith("step ")]
    assert len(lines) >= 4 and all(len(line) < 200 for line in lines)
    (finished,) = [line for line in printed if line.startswith("Finished in ")]  # the summary, once, in one line
    assert str(tmp_path / "run" / "run_summary.json") in finished and not any(line.startswith("{") for line in printed)
    assert "experts (3 blocks): share" in lines[0]
    history = json.loads((tmp_path / "run" / "trainer_state.json").read_text())["log_history"]
    assert "block2_max_expert_share" in history[0]  # on disk: every block


def test_verbose_keeps_transformers_dicts(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(VERBOSE_VARIABLE, "1")
    _finetune(tmp_path)
    printed = capsys.readouterr().out
    assert "'block2_max_expert_share'" in printed and not any(
        line.startswith("step ") for line in printed.splitlines()
    )
    assert '"output_dir"' in printed  # the whole run summary


def test_nan_and_infinite_values_print_instead_of_stopping_the_run():
    line = concise_line({"grad_norm": float("nan"), "eval_spearmanr": float("inf"), "loss": 0.5}, 3, 9)
    assert line == "step 3/9 | grad_norm nan | eval_spearmanr inf | loss 0.5"


@pytest.mark.parametrize("flag_position", [0, -1])
def test_the_verbose_flag_is_taken_before_the_command(flag_position, monkeypatch):
    import os

    from compact_bert.cli.main import main

    monkeypatch.setenv(VERBOSE_VARIABLE, "0")  # recorded, so the "1" that main() sets is undone after the test
    argv = ["presets"]
    argv.insert(flag_position if flag_position == 0 else len(argv), "--verbose")
    assert main(argv) == 0
    assert os.environ[VERBOSE_VARIABLE] == "1"
