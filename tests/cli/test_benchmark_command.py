"""``compact-bert benchmark``: a table and JSON for a preset, ONNX runtimes and latency.json for a folder, early
errors."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from compact_bert.cli.main import main
from compact_bert.evaluation.latency_report import read_latency
from tests.conftest import tiny_configs


def test_preset_prints_a_table_and_writes_json(tmp_path, capsys):
    output = tmp_path / "latency.json"
    assert (
        main(
            [
                "benchmark",
                "minimoe-4l-192h",
                "--batch_sizes",
                "1",
                "2",
                "--sequence_lengths",
                "8",
                "--runtimes",
                "eager",
                "--rounds",
                "2",
                "--warmup",
                "1",
                "--json",
                str(output),
            ]
        )
        == 0
    )
    rows = json.loads(output.read_text())["rows"]
    assert [(row["runtime"], row["batch_size"], row["sequence_length"]) for row in rows] == [
        ("eager", 1, 8),
        ("eager", 2, 8),
    ]
    assert all(row["p90_ms"] >= row["median_ms"] > 0 and row["vs_eager"] == 1.0 for row in rows)
    printed = capsys.readouterr().out
    assert "runtime" in printed and "vs eager" in printed and printed.count("\neager ") == 2
    assert printed.count("(reference)") == 2  # eager against itself


@pytest.mark.parametrize(
    ("ratio", "words"), [(0.5, "2.00x faster"), (1.43, "1.43x slower"), (1.0, "(reference)"), (1.001, "same")]
)
def test_ratios_say_faster_or_slower(ratio, words):
    from compact_bert.cli.benchmark_command import speed_against_eager

    assert speed_against_eager(ratio) == words


@pytest.fixture(scope="module")
def exported_folder(tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="ONNX runtimes need the `export` extra")
    from compact_bert.export.onnx_exporter import export_onnx
    from compact_bert.export.onnx_quantization import quantize_onnx

    folder = tmp_path_factory.mktemp("bench") / "model"
    config = tiny_configs()["minimoe"]
    config.num_labels = 2
    torch.manual_seed(0)
    transformers.AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    export_onnx(folder, folder / "onnx", "text-classification", exporter="dynamo")
    quantize_onnx(folder / "onnx", "text-classification", quantizer="onnxruntime")
    return folder


def test_folder_with_exports_measures_them_and_writes_latency_for_the_card(exported_folder, capsys):
    assert (
        main(
            [
                "benchmark",
                str(exported_folder),
                "--sequence_lengths",
                "16",
                "--runtimes",
                "eager",
                "onnx",
                "onnx-int8",
                "--rounds",
                "3",
                "--warmup",
                "1",
                "--write_latency",
            ]
        )
        == 0
    )
    report = read_latency(exported_folder)
    assert (report.batch_size, report.sequence_length) == (1, 16)
    assert set(report.runtimes) == {"eager", "onnx", "onnx-int8"}
    assert (
        report.runtimes["onnx-int8"].file == "onnx/model_quantized.onnx"
        and report.runtimes["onnx-int8"].precision == "int8"
    )
    card = (exported_folder / "README.md").read_text(encoding="utf-8")
    assert "onnx/model_quantized.onnx" in card and f"{report.runtimes['onnx'].median_ms:.2f}" in card
    assert "onnx-int8" in capsys.readouterr().out


def test_compiled_runtime_matches_the_table_shape(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    output = tmp_path / "rows.json"
    folder = tmp_path / "model"
    torch.manual_seed(0)
    config = tiny_configs()["ib_bert"]
    config.num_hidden_layers = 1  # inductor compiles every kernel with the C++ compiler: keep the graph small
    transformers.AutoModel.from_config(config).save_pretrained(folder)
    assert (
        main(
            [
                "benchmark",
                str(folder),
                "--sequence_lengths",
                "8",
                "--rounds",
                "2",
                "--warmup",
                "1",
                "--json",
                str(output),
            ]
        )
        == 0
    )
    rows = json.loads(output.read_text())["rows"]
    assert [row["runtime"] for row in rows] == ["eager", "optimized", "compiled"]  # no export: no ONNX runtimes


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["no-such-preset"], "neither a model folder nor a preset"),
        (["minimoe-4l-192h", "--batch_sizes", "0"], "--batch_sizes must be positive"),
        (
            ["minimoe-4l-192h", "--sequence_lengths", "4096", "--runtimes", "eager"],
            "exceed the model's max_position_embeddings",
        ),
        (["minimoe-4l-192h", "--runtimes", "onnx"], "a preset has no export"),
        (["minimoe-4l-192h", "--write_latency"], "--write_latency needs a model folder"),
        (["minimoe-4l-192h", "--rounds", "0"], "--rounds must be >= 1"),
        (["minimoe-4l-192h", "--json", "/"], r"--json / is a folder; give the path of a file"),
        (["minimoe-4l-192h", "--json", "/proc/no/such/dir/out.json"], r"--json .*cannot be created|is not writable"),
    ],
)
def test_bad_arguments_fail_early_with_the_flag_named(arguments, message):
    with pytest.raises(SystemExit, match=message):
        main(["benchmark", *arguments])


def test_folder_without_the_requested_export_names_the_missing_file(tmp_path):
    folder = tmp_path / "model"
    transformers.AutoModel.from_config(tiny_configs()["minimoe"]).save_pretrained(folder)
    with pytest.raises(SystemExit, match=r"onnx/model_quantized\.onnx does not exist; export first"):
        main(["benchmark", str(folder), "--runtimes", "onnx-int8"])
