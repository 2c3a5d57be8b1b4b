"""The student-results recipe (``examples/student_results.py``) and its report: resumable runs, the
tables' arithmetic, paper 002's verdicts and the picture."""

from __future__ import annotations

import json
import statistics

import pytest

from examples import student_results
from examples.comparison_flags import COMPARISON_FLAGS
from examples.student_results_report import directions, task_table, write_report
from tests.conftest import shared_data


def _record(value: float, cpu: float = 60.0) -> dict:
    return {"value": value, "cpu_seconds": cpu, "wall_seconds": cpu / 2, "reported_checkpoint": "final model"}


def _runs(moe: tuple[float, float], dense: tuple[float, float]) -> dict:
    return {
        "sst2": {
            "teacher": {"teacher": [_record(0.84, 120), _record(0.86, 120)]},
            "minimoe-4l-384h": {"teacher init": [_record(moe[0]), _record(moe[1])]},
            "minilm-4l-384h": {"teacher init": [_record(dense[0]), _record(dense[1])]},
        }
    }


def test_training_flags_are_the_main_jobs_without_its_task_and_length():
    flags = student_results._SHARED_FLAGS
    assert "--task_name" not in flags and "--max_seq_length" not in flags
    assert len(flags) == len(COMPARISON_FLAGS) - 4
    assert float(flags[flags.index("--learning_rate") + 1]) == 1e-4


def test_table_reports_seeds_mean_spread_share_latency_and_cpu_minutes():
    runs = _runs((0.80, 0.82), (0.78, 0.79))
    table = task_table("sst2", runs["sst2"], {"teacher": 10.0, "minimoe-4l-384h": 5.0, "minilm-4l-384h": 4.0})
    row = next(line for line in table.splitlines() if line.startswith("| minimoe-4l-384h"))
    spread = 100 * statistics.stdev([0.80, 0.82])
    assert (
        row
        == f"| minimoe-4l-384h | teacher init | 80.0, 82.0 | 81.0 ± {spread:.1f} | {100 * 81 / 85:.1f}% | 0.50× | 1.0 |"
    )
    teacher_row = next(line for line in table.splitlines() if line.startswith("| teacher"))
    assert "| fine-tuned | 84.0, 86.0 | 85.0 ± 1.4 | 100.0% | 1.00× | 2.0 |" in teacher_row


@pytest.mark.parametrize(
    ("moe", "dense", "verdict"),
    [
        ((0.82, 0.83), (0.78, 0.79), "holds"),
        ((0.79, 0.81), (0.79, 0.80), "holds only within the seeds' spread"),
        ((0.75, 0.76), (0.80, 0.81), "does not hold"),
        ((0.78, 0.80), (0.79, 0.80), "does not hold, within the seeds' spread"),
    ],
)
def test_paper_002_direction_is_said_plainly_against_the_spread(moe, dense, verdict):
    (line,) = directions(_runs(moe, dense))
    assert line.endswith(f"**{verdict}**.")


def test_report_writes_tables_numbers_and_a_png(tmp_path):
    runs = _runs((0.80, 0.82), (0.78, 0.79))
    latency = {"teacher": 10.0, "minimoe-4l-384h": 5.0, "minilm-4l-384h": 4.0}
    report = write_report(tmp_path, runs, latency, [0, 1])
    assert (tmp_path / "results.md").read_text() == report + "\n"
    assert json.loads((tmp_path / "results.json").read_text())["latency_ms"] == latency
    assert (tmp_path / "accuracy_vs_latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_finished_run_is_not_repeated_and_a_partial_one_is_redone(tmp_path):
    data = shared_data("sst2")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "stale-partial-file").write_text("{")  # what an interrupted run leaves (finetune never writes it)
    arguments = [
        "--model_name_or_path",
        "minilm-3l-96h",
        "--task_name",
        "sst2",
        "--train_file",
        str(data / "train.tsv"),
        "--validation_file",
        str(data / "validation.tsv"),
        "--max_train_samples",
        "32",
        "--max_eval_samples",
        "32",
        "--num_train_epochs",
        "1",
        "--report_to",
        "none",
        "--use_cpu",
        "true",
        "--disable_tqdm",
        "true",
        "--init_from_teacher",
        "none",
    ]
    record = student_results.run_once(folder, arguments, "eval_accuracy")
    assert not (folder / "stale-partial-file").exists()
    summary = json.loads((folder / "run_summary.json").read_text())
    assert record["value"] == summary["eval_accuracy"] and record["cpu_seconds"] > 0
    stamp = (folder / "run_summary.json").stat().st_mtime_ns
    assert student_results.run_once(folder, arguments, "eval_accuracy") == record
    assert (folder / "run_summary.json").stat().st_mtime_ns == stamp


def test_a_task_distilled_run_keeps_its_teacher_logits_in_its_own_folder(tmp_path):
    taught = student_results._own_cache(tmp_path, ["--teacher", "t"])
    assert taught[-2:] == ["--teacher_cache_dir", str(tmp_path / "teacher_cache")]
    assert student_results._own_cache(tmp_path, ["--init_from_teacher", "none"]) == ["--init_from_teacher", "none"]


def test_the_report_rebuilds_from_a_run_stopped_before_its_latency_step(tmp_path, capsys):
    from examples.student_results_report import main

    (tmp_path / "sst2" / "seed-0").mkdir(parents=True)
    (tmp_path / "runs.json").write_text(json.dumps(_runs((0.80, 0.82), (0.78, 0.79))))
    assert main([str(tmp_path)]) == 0
    assert "| minimoe-4l-384h | teacher init | 80.0, 82.0 |" in (tmp_path / "results.md").read_text()
    with pytest.raises(SystemExit, match="neither results.json nor runs.json"):
        main([str(tmp_path / "elsewhere")])
