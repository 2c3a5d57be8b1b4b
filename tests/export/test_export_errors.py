"""Bad export requests fail early, before any model is built or traced, with a message naming the problem."""

from __future__ import annotations

import pytest

from compact_bert.cli.main import main
from compact_bert.export.onnx_exporter import export_onnx
from tests.export.helpers import save_tiny_model


@pytest.fixture(scope="module")
def saved_minimoe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    save_tiny_model("minimoe", "fill-mask", folder, trained_scales=False)
    return folder


def test_unknown_task(saved_minimoe, tmp_path):
    with pytest.raises(ValueError, match=r"Unknown export task 'text-generation'; valid tasks: feature-extraction"):
        export_onnx(saved_minimoe, tmp_path / "out", "text-generation")


def test_task_without_head(monkeypatch):
    from compact_bert import modeling
    from compact_bert.export.tasks import resolve_task

    # Every family has every head today: a family missing one must be refused by name, with what it serves.
    heads = {config_class: dict(classes) for config_class, classes in modeling.AUTO_CLASSES_BY_CONFIG.items()}
    for config_class in heads:
        if config_class.model_type == "minimoe":
            del heads[config_class]["AutoModelForQuestionAnswering"]
    monkeypatch.setattr(modeling, "AUTO_CLASSES_BY_CONFIG", heads)
    with pytest.raises(
        ValueError, match=r"'minimoe' has no head for task 'question-answering'.*serve: feature-extraction"
    ):
        resolve_task("question-answering", "minimoe")


def test_folder_without_weights(saved_minimoe, tmp_path):
    folder = tmp_path / "config_only"
    folder.mkdir()
    (folder / "config.json").write_text((saved_minimoe / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match=r"config_only has no weights \(none of model.safetensors"):
        export_onnx(folder, tmp_path / "out", "fill-mask")
    with pytest.raises(FileNotFoundError, match=r"has no config.json"):
        export_onnx(tmp_path, tmp_path / "out", "fill-mask")


def test_sequence_length_beyond_positions(saved_minimoe, tmp_path, capsys):
    with pytest.raises(SystemExit, match=r"Example sequence length 65 is outside \[2, max_position_embeddings=64\]"):
        main(
            [
                "export",
                "onnx",
                str(saved_minimoe),
                str(tmp_path / "out"),
                "--task",
                "fill-mask",
                "--sequence_length",
                "65",
            ]
        )
    assert not (tmp_path / "out").exists()


def test_not_a_compact_bert_or_bert_layout_folder(tmp_path):
    folder = tmp_path / "distilbert"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "distilbert"}')
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match=r"model_type 'distilbert' is neither a compact-bert family nor"):
        export_onnx(folder, tmp_path / "out", "fill-mask")


def test_optimum_namespace_without_its_exporter_means_no_optimum(monkeypatch):
    """compact-bert installs ``optimum.commands.register`` (its optimum-cli plug-in); where optimum-onnx is absent,
    looking up ``optimum.exporters.onnx`` raises ModuleNotFoundError for the missing parent. That means "use the
    dynamo exporter and onnxruntime's quantizer", not an error."""
    import importlib.util

    from compact_bert.export import onnx_exporter

    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name.startswith("optimum.exporters"):
            raise ModuleNotFoundError("No module named 'optimum.exporters'", name="optimum.exporters")
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert onnx_exporter.optimum_available() is False


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["tflite", "--task", "fill-mask"], r"tflite needs --sequence_length N: a TFLite model runs at the one shape"),
        (["tflite", "--task", "fill-mask", "--sequence_length", "16", "--opset", "17"], r"--opset is for onnx only"),
        (
            ["tflite", "--task", "fill-mask", "--sequence_length", "16", "--exporter", "dynamo"],
            r"--exporter is for onnx only",
        ),
        (["onnx", "--task", "fill-mask", "--batch_size", "2"], r"--batch_size is for tflite"),
        (["onnx", "--task", "fill-mask", "--capacity_factor", "1.25"], r"--capacity_factor is for tflite"),
    ],
)
def test_options_of_the_other_format_are_refused(saved_minimoe, tmp_path, arguments, message):
    format_name, *options = arguments
    with pytest.raises(SystemExit, match=message):
        main(["export", format_name, str(saved_minimoe), str(tmp_path / "out"), *options])
    assert not (tmp_path / "out").exists()


def test_a_capacity_factor_needs_moe_ffn_blocks_and_a_positive_value():
    """``--capacity_factor`` sets the MoE FFN routers' (and the config's) ``eval_capacity_factor``; a dense model or
    a factor <= 0 is refused naming the flag (checked without the `tflite` extra: the setter runs first)."""
    from transformers import AutoModelForSequenceClassification

    from compact_bert.export.tflite_exporter import set_eval_capacity_factor
    from tests.conftest import tiny_configs

    moe = AutoModelForSequenceClassification.from_config(tiny_configs()["minimoe_moe_attention"]).eval()
    assert set_eval_capacity_factor(moe, 1.25) == moe.config.num_hidden_layers
    assert moe.config.eval_capacity_factor == 1.25
    # The attention experts never drop tokens (a dropped token would vanish as a key): their routers keep None.
    assert {m.eval_capacity_factor for name, m in moe.named_modules() if name.endswith("attention.router")} == {None}
    with pytest.raises(ValueError, match=r"--capacity_factor must be > 0, got 0.0"):
        set_eval_capacity_factor(moe, 0.0)
    dense = AutoModelForSequenceClassification.from_config(tiny_configs()["mobilebert"]).eval()
    with pytest.raises(ValueError, match=r"--capacity_factor applies to models with MoE FFN blocks"):
        set_eval_capacity_factor(dense, 1.25)


def test_an_output_folder_that_cannot_be_written_is_named_before_the_export(saved_minimoe, tmp_path):
    taken = tmp_path / "taken.onnx"
    taken.write_text("x")
    with pytest.raises(SystemExit, match=rf"export: OUTPUT_DIR {taken} is a file, not a folder"):
        main(["export", "onnx", str(saved_minimoe), str(taken), "--task", "fill-mask"])
    with pytest.raises(SystemExit, match=r"export: OUTPUT_DIR /proc/compact-bert-out cannot be created"):
        main(["export", "onnx", str(saved_minimoe), "/proc/compact-bert-out", "--task", "fill-mask"])


def test_tflite_without_its_extra_names_the_packages(saved_minimoe, tmp_path, monkeypatch):
    from compact_bert.export import tflite_exporter

    monkeypatch.setattr(tflite_exporter, "_REQUIRED_MODULES", {"no_such_module_for_test": "no-such-package"})
    with pytest.raises(SystemExit, match=r"TFLite export needs no-such-package: install the `tflite` extra"):
        main(
            [
                "export",
                "tflite",
                str(saved_minimoe),
                str(tmp_path / "out"),
                "--task",
                "fill-mask",
                "--sequence_length",
                "16",
            ]
        )


def test_tflite_length_and_batch_are_checked_before_conversion(saved_minimoe, tmp_path, monkeypatch):
    from compact_bert.export import tflite_exporter

    monkeypatch.setattr(tflite_exporter, "_REQUIRED_MODULES", {})  # the checks below come before litert-torch is used
    with pytest.raises(SystemExit, match=r"Example sequence length 65 is outside \[2, max_position_embeddings=64\]"):
        main(
            [
                "export",
                "tflite",
                str(saved_minimoe),
                str(tmp_path / "out"),
                "--task",
                "fill-mask",
                "--sequence_length",
                "65",
            ]
        )
    with pytest.raises(SystemExit, match=r"batch_size must be >= 1, got 0"):
        main(
            [
                "export",
                "tflite",
                str(saved_minimoe),
                str(tmp_path / "out"),
                "--task",
                "fill-mask",
                "--sequence_length",
                "16",
                "--batch_size",
                "0",
            ]
        )
    assert not (tmp_path / "out").exists()
