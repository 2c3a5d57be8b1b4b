"""The main job's shipping step where the `export` extra is missing, and its closing table (the full step runs in
``tests/distillation/test_minimoe_tcd_cli.py::test_main_job_folder_loads_everywhere``)."""

from __future__ import annotations

from compact_bert.jobs import shipping as main_job_shipping


def test_without_the_export_extra_the_step_says_how_to_get_it(monkeypatch, capsys):
    monkeypatch.setattr(main_job_shipping, "_export_available", lambda: False)
    summary = {"finetune_output_dir": "/nowhere"}
    assert main_job_shipping.ship_when_possible(summary) is False
    assert summary == {"finetune_output_dir": "/nowhere"}
    assert 'pip install "compact-bert[export]"' in capsys.readouterr().out


def test_summary_table_reports_every_measured_field():
    table = main_job_shipping.summary_table(
        {
            "student_total_params": 11_300_000,
            "student_active_params_per_token": 7_800_000,
            "sst2_eval_accuracy": 0.7213,
            "onnx_sst2_accuracy": 0.7213,
            "onnx_int8_sst2_accuracy": 0.7179,
            "onnx_int8_agreement": 0.9885,
            "latency_ms": {"eager": 12.04, "onnx": 5.51, "onnx-int8": 3.26},
            "latency_batch_and_length": [1, 128],
            "onnx_fp32_bytes": 46_200_000,
            "onnx_int8_bytes": 26_400_000,
            "onnx_parity_max_abs_diff": 2.4e-7,
            "output_dir": "outputs/minimoe-student",
            "finetune_output_dir": "outputs/minimoe-student-sst2",
        }
    )
    for text in (
        "11.3M / 7.8M",
        "0.7213 / 0.7213 / 0.7179",
        "98.9%",
        "batch 1 x 128",
        "12.0 / 5.5 / 3.3",
        "46.2 MB / 26.4 MB",
        "2.4e-07",
        "outputs/minimoe-student-sst2",
    ):
        assert text in table, text


def test_comparison_table_shows_share_kept_and_latency_ratios():
    from compact_bert.jobs.task_comparison import comparison_table

    table = comparison_table(
        {
            "comparison": {
                "sst2_accuracy": {"teacher": 0.8314, "baseline": 0.7924, "student": 0.8096},
                "share_of_teacher_kept": {"baseline": 0.9531, "student": 0.9738},
                "latency_ms": {
                    "teacher eager": 18.0,
                    "teacher (compact-bert path) eager": 10.0,
                    "baseline eager": 5.4,
                    "student eager": 5.4,
                    "teacher onnx": 10.0,
                    "student onnx": 5.0,
                },
            }
        }
    )
    lines = {line.split("  ")[0]: line for line in table.splitlines()}
    assert "97.4%" in lines["student"] and "0.30x" in lines["student"] and "0.50x" in lines["student"]
    assert "95.3%" in lines["baseline"] and "79.2%" in lines["baseline"]
    assert "0.56x" in lines["teacher (compact-bert path)"] and "100%" in lines["teacher"]
