"""One error path for every command: a failure is one ``compact-bert:`` line and exit status 1;
``compact-bert --debug`` or ``$COMPACT_BERT_DEBUG`` shows the traceback; an error nobody anticipated says it is an
internal error and how to report it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

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


def test_ctrl_c_during_training_ends_with_one_line_saying_what_was_kept(tmp_path):
    """SIGINT while a run trains: exit status 130 and one line on stderr (no traceback) saying what the output
    folder holds; the interrupted run has no run_summary.json, so nothing takes it for a finished one."""
    import signal

    from compact_bert.finetuning.bundled_data import bundled_sst2_files

    files = bundled_sst2_files()
    # The child takes SIGINT as a terminal's foreground process does. A suite started in the background (`cmd &`,
    # nohup, a CI runner) ignores SIGINT, every process it starts inherits that, and Python keeps an inherited
    # "ignore": the child then trained on through the signal (seen in CI: still training at step 1097).
    foreground = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'compact-bert'; runpy.run_module('compact_bert.cli.main', run_name='__main__')"
    )
    command = [
        sys.executable,
        "-X",
        "faulthandler",  # SIGABRT on a hang prints where the child was, in the failure message below
        "-c",
        foreground,
        "finetune",
        "--model_name_or_path",
        "minilm-3l-96h",
        "--task_name",
        "sst2",
        "--train_file",
        str(files["train"]),
        "--validation_file",
        str(files["validation"]),
        "--max_steps",
        "100000",
        "--early_stopping_patience",
        "0",  # off: a fast host would otherwise early-stop and exit 0 before the signal
        "--logging_steps",
        "1",
        "--logging_strategy",
        "steps",
        "--report_to",
        "none",
        "--output_dir",
        str(tmp_path / "run"),
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    # stdout is read to its end on a thread, so the child never blocks on a full pipe; SIGINT goes once it has
    # logged two optimizer steps (well inside training, past any first-step setup).
    stdout_lines: list[str] = []
    training = threading.Event()

    def read_stdout():
        for line in process.stdout:
            stdout_lines.append(line)
            if sum(text.startswith("step ") for text in stdout_lines) >= 2:
                training.set()
        training.set()  # end of output: the child exited before it trained, reported below

    stderr_lines: list[str] = []
    readers = [
        threading.Thread(target=read_stdout, daemon=True),
        threading.Thread(target=lambda: stderr_lines.extend(process.stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        assert training.wait(timeout=300), "the child logged no training step within 300 s"
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack to stderr
            process.wait(timeout=30)
    finally:
        process.kill()
        for reader in readers:
            reader.join(timeout=10)
    stdout, stderr = "".join(stdout_lines), "".join(stderr_lines)
    # faulthandler's dump ends with a long list of extension modules: the stacks come before it
    stacks = stderr.split("\nExtension modules:")[0]
    assert process.returncode == 130, f"exit {process.returncode}\nstderr: {stacks[-4000:]}\nstdout: {stdout[-1000:]}"
    lines = [line for line in stderr.splitlines() if line.strip() and "warn" not in line.lower()]
    assert "Traceback" not in stderr and lines[-1].startswith("compact-bert: interrupted (Ctrl-C); checkpoints")
    assert not (tmp_path / "run" / "run_summary.json").exists()


def test_ctrl_c_freezes_the_heap_so_the_exit_skips_the_final_garbage_collection(monkeypatch, capsys):
    """The interpreter's last collection walks everything a training run built (10-13 s on a loaded 2-core host);
    objects frozen first are skipped by it, so Ctrl-C ends the command promptly."""
    import gc

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "_dispatch", interrupted)
    monkeypatch.delenv(cli_main.DEBUG_VARIABLE, raising=False)
    assert gc.get_freeze_count() == 0
    try:
        with pytest.raises(SystemExit) as exit_info:
            cli_main.main(["presets"])
        assert exit_info.value.code == 130 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert "interrupted (Ctrl-C)" in capsys.readouterr().err


def test_the_interrupted_line_says_what_each_kind_of_command_leaves():
    from compact_bert.cli.main import interrupted_message

    assert "only once they are checked" in interrupted_message(["export", "onnx", "DIR", "OUT", "--task", "x"])
    assert "--resume_from_checkpoint last" in interrupted_message(["distill", "task"])
    assert "one commit" in interrupted_message(["push", "DIR", "user/repo"])
    assert interrupted_message(["presets"]).endswith("it writes no files.")
