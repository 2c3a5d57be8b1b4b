"""Run the compact-bert CLI in subprocesses, as users and accelerate do, or in this process (``main([...])``) for its
refusals and for runs whose terminal output no test reads."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
HELD_OUT = REPO_ROOT / "distillation" / "corpus" / "wikitext2_heldout.txt"
QUICK_DATA = ["--corpus", str(HELD_OUT), "--block_size", "32", "--max_train_blocks", "256", "--max_eval_blocks", "16"]
QUIET = ["--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true", "--seed", "0"]


def environment() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def free_port() -> int:
    """A port for accelerate's rendezvous that no other test holds: the suite runs in parallel workers, and two
    multi-process runs on one fixed port would meet each other's processes."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def accelerate_launch(processes: int, *target: str) -> list[str]:
    """``accelerate launch`` of ``target`` (a script and its arguments, or ``-m module …``) on ``processes`` CPU
    processes (gloo, torchrun launcher), on a port no other test holds."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        str(processes),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        *target,
    ]


def cli_command(arguments: list[str], processes: int = 1) -> list[str]:
    if processes == 1:
        return [sys.executable, "-m", "compact_bert.cli.main", *arguments]
    return accelerate_launch(processes, "-m", "compact_bert.cli.main", *arguments)


def refusal_in_this_process(arguments: list[str]) -> str:
    """The message with which the command refuses ``arguments``, run as a function (``main([...])``, as the
    fine-tuning tests run whole commands) to spare an interpreter start per refusal. A refusal is an exit with a
    non-zero status and a message, never an exception (which a user would see as a traceback)."""
    from compact_bert.cli.main import main

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            status = main(arguments)
        except SystemExit as error:
            status = error.code
    assert status not in (0, None), f"the command was not refused: {arguments}"
    return stderr.getvalue() + (status if isinstance(status, str) else "")


def run_in_this_process(arguments: list[str]) -> None:
    """Run a command that must succeed as a function (``main([...])``, as the fine-tuning tests run theirs), for
    fixtures that need the folders a command writes and not what a terminal shows: no interpreter start (about
    10 s of imports) per fixture."""
    from compact_bert.cli.main import main

    assert main(arguments) == 0, f"compact-bert {' '.join(arguments)} failed"


def run_cli(arguments: list[str], processes: int = 1, timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(
        cli_command(arguments, processes),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(),
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def stage_steps(checkpoint: Path) -> dict[int, int]:
    """Optimizer steps per stage index, from a checkpoint's log history (logging_steps=1)."""
    history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    steps: dict[int, set[int]] = {}
    for entry in history:
        if "stage" in entry and "eval_loss" not in entry:
            steps.setdefault(int(entry["stage"]), set()).add(entry["step"])
    return {stage: len(members) for stage, members in sorted(steps.items())}


def kill_when_path_exists(arguments: list[str], path: Path, timeout: float = 300, poll_seconds: float = 0.05) -> None:
    """Start the CLI, SIGKILL it as soon as ``path`` exists (a checkpoint folder appearing: Trainer is still
    writing it; its manifest: it is complete), and fail if the run ended first."""
    process = subprocess.Popen(
        cli_command(arguments), env=environment(), cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + timeout
    while not path.exists():
        assert process.poll() is None, "the run ended before it could be interrupted"
        assert time.time() < deadline
        time.sleep(poll_seconds)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
