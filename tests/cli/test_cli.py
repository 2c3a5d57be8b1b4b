"""The ``compact-bert`` console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from compact_bert.cli.main import main


def _console_script() -> str:
    """The ``compact-bert`` script of the environment running the tests, whether or not its ``bin`` is on PATH
    (a venv used through its full interpreter path is not activated)."""
    name = "compact-bert.exe" if os.name == "nt" else "compact-bert"
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (folder / name).is_file():
            return str(folder / name)
    found = shutil.which("compact-bert")
    if found is None:
        pytest.fail(f"No compact-bert console script next to {sys.executable} or on PATH: install the package.")
    return found


def test_presets_json_from_the_installed_console_script():
    result = subprocess.run([_console_script(), "presets", "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = {row["preset"]: row for row in json.loads(result.stdout)}
    assert rows["mobilebert"]["total_params"] == pytest.approx(25.3e6, rel=0.025)
    assert rows["moe-bert-small"]["active_params_per_token"] < rows["moe-bert-small"]["total_params"] / 10
    assert rows["minimoe-4l-192h"]["ffn_experts"] == 4 and rows["minilm-4l-192h"]["ffn_experts"] == 1
    assert rows["vanilla-bert-base"]["flops_per_sequence"] == pytest.approx(22.5e9, rel=0.01)


def test_version_names_the_package_and_the_libraries_it_runs_on():
    import importlib.metadata

    result = subprocess.run([_console_script(), "--version"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    versions = {name: importlib.metadata.version(name) for name in ("compact-bert", "torch", "transformers")}
    assert result.stdout.strip() == (
        "compact-bert {compact-bert} (torch {torch}, transformers {transformers})".format_map(versions)
    )


def test_presets_table(capsys):
    assert main(["presets"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| preset |")
    assert "| moe-bert-base | moe_bert | compact-bert type (trust_remote_code) | 12 | 768 | 1,64 | 3.68B |" in table
    assert "| minilm-3l-384h | bert | transformers BERT (no remote code) | 3 | 384 | 1,1 | 17.4M |" in table


def test_bad_arguments_exit_with_usage(capsys):
    with pytest.raises(SystemExit):
        main(["presets", "--sequence-length", "0"])
    with pytest.raises(SystemExit):
        main(["no-such-command"])
    assert "invalid choice" in capsys.readouterr().err


def test_a_cpu_run_pins_no_memory_and_warns_nothing_about_it(tmp_path):
    import warnings

    import torch

    from compact_bert.cli import finetune_command
    from tests.conftest import shared_data

    if torch.cuda.is_available():
        pytest.skip("an accelerator is present: pinned memory is the right default there")
    data = shared_data("sst2")
    arguments = [
        "--model_name_or_path",
        "minilm-3l-96h",
        "--task_name",
        "sst2",
        "--train_file",
        str(data / "train.tsv"),
        "--max_train_samples",
        "16",
        "--num_train_epochs",
        "1",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(tmp_path / "run"),
        "--init_from_teacher",
        "none",
    ]
    _, _, config = finetune_command.parse_finetune_arguments(arguments)
    assert config.dataloader_pin_memory is False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        finetune_command.finetune_from_flags(arguments)
    assert not [str(warning.message) for warning in caught if "pin_memory" in str(warning.message)]


def test_no_progress_bars_fill_a_log_without_a_terminal(tmp_path):
    """Output to a file or a pipe (no terminal): no "Loading weights" bar, no redrawn tqdm lines, one JSON result."""
    import gzip
    import json
    import os
    import subprocess
    import sys

    from compact_bert.evaluation.sts import bundled_sts_validation

    lines = gzip.decompress(bundled_sts_validation().read_bytes()).decode().splitlines()
    (tmp_path / "sts.tsv").write_text("\n".join(lines[:21]) + "\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "compact_bert.cli.main",
            "evaluate",
            "sts",
            "all-MiniLM-L6-v2",
            "--sts_file",
            str(tmp_path / "sts.tsv"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "it/s]" not in result.stderr and "Loading weights" not in result.stderr, result.stderr[-2000:]
    assert json.loads(result.stdout)["pairs"] == 20


HELP_COMMANDS = [
    "",
    "presets",
    "convert",
    "export",
    "push",
    "benchmark",
    "evaluate",
    "pretrain",
    "finetune",
    "distill",
    "distill mobilebert",
    "distill minimoe",
    "distill tcd",
    "distill embeddings",
    "distill task",
]


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_every_command_prints_its_help(command, capsys):
    """argparse formats each help text with ``%``: a bare ``%`` in one (``97% of``) made ``--help`` a traceback."""
    from compact_bert.cli.main import TRAINING_COMMANDS

    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code in (0, None)
    printed = capsys.readouterr().out
    assert printed.startswith("usage: ")
    if tuple(command.split()) in TRAINING_COMMANDS:
        assert "--keep_checkpoints" in printed and "--output_dir" in printed
