"""Dynamic int8 of an exported, fine-tuned classifier: it is smaller and predicts like fp32 on real SST-2 dev
sentences; ``ORTModelForSequenceClassification`` loads it where Optimum is installed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compact_bert.cli.main import main
from compact_bert.export.onnx_quantization import QUANTIZED_FILE, quantize_onnx
from compact_bert.finetuning.bundled_data import bundled_sst2_files

pytest.importorskip("onnxruntime", reason="int8 export needs onnxruntime (the `export` extra)")

from compact_bert.evaluation.exported_accuracy import (
    compare_exported_models,
    onnx_predictions,
    read_labelled_sentences,
)

TINY_MINIMOE = '{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96}'
DEV_SENTENCES = 300


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny MiniMoE fine-tuned on the bundled SST-2 slice, exported with ``--quantize int8``."""
    folder = tmp_path_factory.mktemp("int8")
    files = bundled_sst2_files()
    assert (
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minimoe-4l-192h",
                "--model_overrides",
                TINY_MINIMOE,
                "--task_name",
                "sst2",
                "--train_file",
                str(files["train"]),
                "--validation_file",
                str(files["validation"]),
                "--max_train_samples",
                "1600",
                "--max_eval_samples",
                "16",
                "--max_steps",
                "200",
                "--per_device_train_batch_size",
                "16",
                "--learning_rate",
                "1e-3",
                "--seed",
                "0",
                "--report_to",
                "none",
                "--save_strategy",
                "no",
                "--eval_strategy",
                "no",
                "--load_best_model_at_end",
                "false",
                "--output_dir",
                str(folder / "model"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "export",
                "onnx",
                str(folder / "model"),
                str(folder / "onnx"),
                "--task",
                "text-classification",
                "--quantize",
                "int8",
            ]
        )
        == 0
    )
    return folder / "onnx"


def test_int8_is_smaller_and_agrees_with_fp32_on_real_dev_sentences(exported):
    from transformers import AutoTokenizer

    float_path, int8_path = exported / "model.onnx", exported / QUANTIZED_FILE
    assert int8_path.stat().st_size < 0.6 * float_path.stat().st_size
    tokenizer = AutoTokenizer.from_pretrained(exported)
    measured = compare_exported_models(
        {"fp32": float_path, "int8": int8_path}, tokenizer, bundled_sst2_files()["validation"], limit=DEV_SENTENCES
    )
    sentences, _ = read_labelled_sentences(bundled_sst2_files()["validation"], DEV_SENTENCES)
    fp32 = onnx_predictions(float_path, tokenizer, sentences)
    assert 0.2 < fp32.mean() < 0.8, "fp32 predicts (almost) one class: agreement would prove nothing"
    assert measured.accuracy["fp32"] > 0.56, measured  # it learned something from the real data
    assert measured.examples == DEV_SENTENCES and measured.agreement >= 0.95, measured


def test_int8_quantizes_every_product_with_a_weight_expert_products_included(exported):
    """The routed MoE form gives every expert its own constant matrix: the quantizer turns each product with a
    weight into an int8 one, and no float ``MatMul`` on a weight is left (the attention's score products have none)."""
    import onnx

    graph = onnx.load(str(exported / QUANTIZED_FILE)).graph
    weights = {initializer.name for initializer in graph.initializer}
    assert not [node.name for node in graph.node if node.op_type in ("MatMul", "Gemm") and node.input[1] in weights]
    config = json.loads((exported / "config.json").read_text())
    integer_products = [
        node for node in graph.node if "Integer" in node.op_type or node.op_type == "DynamicQuantizeMatMul"
    ]
    assert len(integer_products) >= 2 * config["num_experts"] * config["num_hidden_layers"]


def test_cli_reports_the_size_ratio(exported, capsys):
    assert (
        main(
            [
                "export",
                "onnx",
                str(exported.parent / "model"),
                str(exported.parent / "again"),
                "--task",
                "text-classification",
                "--quantize",
                "int8",
            ]
        )
        == 0
    )
    output = capsys.readouterr().out
    report = json.loads(output[output.index("{\n") :])  # the fine-tuning fixture may have printed before
    assert report["int8"].endswith(QUANTIZED_FILE) and 0 < report["size_ratio"] < 0.6
    assert report["int8_bytes"] == (exported.parent / "again" / QUANTIZED_FILE).stat().st_size


def test_ort_model_loads_the_int8_file_where_optimum_is_installed(exported):
    pytest.importorskip("optimum.onnxruntime", reason="Optimum's ORTModel needs the `onnx` extra (transformers 4.57)")
    import onnxruntime
    from optimum.onnxruntime import ORTModelForSequenceClassification
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(exported)
    encoded = tokenizer(["a gripping , funny film", "dull and lifeless"], padding=True, return_tensors="np")
    ort_model = ORTModelForSequenceClassification.from_pretrained(exported, file_name=QUANTIZED_FILE)
    logits = ort_model(
        **tokenizer(["a gripping , funny film", "dull and lifeless"], padding=True, return_tensors="pt")
    ).logits
    session = onnxruntime.InferenceSession(str(exported / QUANTIZED_FILE), providers=["CPUExecutionProvider"])
    feeds = {graph_input.name: encoded[graph_input.name].astype(np.int64) for graph_input in session.get_inputs()}
    np.testing.assert_allclose(logits.numpy(), session.run(["logits"], feeds)[0], atol=1e-6)


def test_quantizing_a_folder_without_model_onnx_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"model\.onnx does not exist"):
        quantize_onnx(tmp_path, "text-classification")


def test_bad_label_line_is_named(tmp_path):
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("sentence\tlabel\ngood\t1\nbad\tnegative\n")
    with pytest.raises(ValueError, match=r"dev\.tsv, line 3"):
        read_labelled_sentences(tsv)


def test_int8_accuracy_recipe_writes_its_table(exported, tmp_path):
    from examples import int8_accuracy

    assert (
        int8_accuracy.main([str(exported.parent / "model"), "--output_dir", str(tmp_path / "runs"), "--limit", "40"])
        == 0
    )
    (row,) = json.loads((tmp_path / "runs" / "results.json").read_text())
    assert row["examples"] == 40 and 0 < row["size_ratio"] < 0.6 and row["fp32_parity_max_abs_diff"] < 1e-4
    assert row["change_points"] == pytest.approx(100 * (row["int8_accuracy"] - row["fp32_accuracy"]))
    assert "| SST-2 dev fp32 |" in (tmp_path / "runs" / "results.md").read_text()
    with pytest.raises(SystemExit):
        int8_accuracy.main([str(tmp_path / "missing")])


def test_quantizing_a_routed_moe_graph_says_nothing_about_its_integer_tensors(exported, tmp_path, caplog):
    """The routed form's token positions are int64 tensors; onnxruntime's quantizer logged 20 lines for each."""
    import logging

    from compact_bert.export.onnx_quantization import quantize_onnx_file

    with caplog.at_level(logging.INFO):
        quantize_onnx_file(exported / "model.onnx", tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").is_file()
    assert not [record for record in caplog.records if "unsupported type to quantize" in record.getMessage()]
