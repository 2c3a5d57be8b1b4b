"""One error path for every command: a failure is one ``compact-bert:`` line and exit status 1;
``compact-bert --debug`` or ``$COMPACT_BERT_DEBUG`` shows the traceback; an error nobody anticipated says it is an
internal error and how to report it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from compact_bert.cli import main as cli_main
from compact_bert.cli import presets_command


def _boom(args):
    raise RuntimeError("boom in a command")


def test_an_unanticipated_error_is_one_line_naming_it_and_how_to_report_it(monkeypatch):
    monkeypatch.setattr(presets_command, "run", _boom)
    monkeypatch.delenv(cli_main.DEBUG_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["presets"])
    message = str(exit_info.value.code)
    assert message.startswith("compact-bert: internal error (RuntimeError: boom in a command)")
    assert "compact-bert --debug" in message and "\n" not in message


@pytest.mark.parametrize("switch", ["flag", "environment"])
def test_debug_shows_the_exception_itself(monkeypatch, switch):
    monkeypatch.setattr(presets_command, "run", _boom)
    argv = ["presets"]
    if switch == "flag":
        argv = ["--debug", *argv]
    else:
        monkeypatch.setenv(cli_main.DEBUG_VARIABLE, "1")
    with pytest.raises(RuntimeError, match="boom in a command"):
        cli_main.main(argv)


def test_a_file_system_error_names_its_path():
    error = FileExistsError(17, "File exists", "/tmp/out/model.onnx")
    assert cli_main.describe_failure(error) == "compact-bert: /tmp/out/model.onnx: File exists"


def test_a_failing_command_prints_one_line_and_no_traceback(tmp_path):
    """As a user sees it: the export of a folder that is a file, in a fresh process."""
    (tmp_path / "not_a_folder").write_text("x")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "compact_bert.cli.main",
            "export",
            "onnx",
            str(tmp_path / "not_a_folder"),
            str(tmp_path / "out"),
            "--task",
            "feature-extraction",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr and lines[-1].startswith("compact-bert: "), result.stderr
    assert lines[-1].startswith("compact-bert: export: MODEL_DIR ") and "not_a_folder is a file" in lines[-1]


def test_exit_messages_take_one_form():
    assert cli_main.one_line_message("compact-bert export: --x is bad") == "compact-bert: export: --x is bad"
    assert cli_main.one_line_message("compact-bert: y") == "compact-bert: y"
    assert cli_main.one_line_message("--z is bad") == "compact-bert: --z is bad"
