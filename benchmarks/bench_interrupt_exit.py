"""How long ``compact-bert finetune`` takes to exit after Ctrl-C, with the heap frozen first (what ``cli/main.py``
does) and without (``gc.freeze`` replaced by a no-op in the child), side by side in one run.

Each round starts both children on the bundled SST-2 slice (``minilm-3l-96h``, early stopping off), sends SIGINT
once each has logged its second optimizer step and times the seconds to its exit. ``--load N`` keeps N matmul
workers busy meanwhile, as a loaded machine (a test suite, other jobs) does: that is where the interpreter's final
garbage collection, which walks every object the run built, becomes seconds long. Prints each variant's median and
the ratio of the two.

Run: ``python benchmarks/bench_interrupt_exit.py --load 4`` (about 3 minutes on 2 cores; defaults: 2 rounds).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# The child as a terminal's foreground process: SIGINT handled even where this script runs with it ignored.
_CHILD = (
    "import gc, runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); {patch}"
    "sys.argv[0] = 'compact-bert'; runpy.run_module('compact_bert.cli.main', run_name='__main__')"
)
VARIANTS = {"frozen heap (shipped)": "", "final collection (gc.freeze a no-op)": "gc.freeze = lambda: None; "}


def _matmul_worker() -> None:
    import torch

    torch.set_num_threads(2)
    matrix = torch.randn(512, 512)
    while True:
        matrix @ matrix


def seconds_to_exit(patch: str, output_dir: str) -> float:
    """Start one child, SIGINT it after its second logged step, and return the seconds until it exited."""
    from compact_bert.finetuning.bundled_data import bundled_sst2_files

    files = bundled_sst2_files()
    command = [sys.executable, "-c", _CHILD.format(patch=patch), "finetune", "--model_name_or_path", "minilm-3l-96h"]
    command += ["--task_name", "sst2", "--train_file", str(files["train"]), "--validation_file"]
    command += [str(files["validation"]), "--max_steps", "100000", "--early_stopping_patience", "0"]
    command += ["--logging_steps", "1", "--logging_strategy", "steps", "--report_to", "none", "--disable_tqdm", "true"]
    command += ["--output_dir", output_dir]
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    steps = 0
    for line in child.stdout:
        steps += line.startswith("step ")
        if steps >= 2:
            break
    else:
        raise SystemExit(f"the child exited (status {child.wait()}) before it logged two training steps")
    start = time.perf_counter()
    child.send_signal(signal.SIGINT)
    child.stdout.close()  # nothing more is read: a full pipe must not hold the child up
    status = child.wait(timeout=600)
    if status != 130:
        raise SystemExit(f"the interrupted child exited with status {status}, not 130")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, default=4, help="Busy matmul workers during the measurement.")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    workers = [multiprocessing.Process(target=_matmul_worker, daemon=True) for _ in range(args.load)]
    for worker in workers:
        worker.start()
    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for round_index in range(args.rounds):
                for name, patch in VARIANTS.items():
                    folder = os.path.join(scratch, f"{round_index}-{len(seconds[name])}-{len(patch)}")
                    seconds[name].append(seconds_to_exit(patch, folder))
    finally:
        for worker in workers:
            worker.terminate()
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"seconds from SIGINT to exit, {args.load} busy matmul workers, {args.rounds} rounds:")
    for name, values in seconds.items():
        print(f"  {name}: median {medians[name]:.1f} s ({', '.join(f'{value:.1f}' for value in values)})")
    frozen, collected = medians.values()
    print(f"final collection / frozen heap: {collected / frozen:.1f}x")


if __name__ == "__main__":
    main()
