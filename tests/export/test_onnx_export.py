"""``compact-bert export onnx`` through torch.onnx dynamo + onnxruntime: the path of transformers 5 (also run on
4.57, forced). Parity is checked at fp32 with |onnxruntime − PyTorch| ≤ 1e-4 × max(1, max |PyTorch output|)."""

from __future__ import annotations

import pytest
import torch
import transformers

from compact_bert.cli.main import main
from compact_bert.export import moe_export_form
from compact_bert.export.onnx_exporter import export_onnx
from compact_bert.export.tasks import EXPORT_TASKS
from tests.export.helpers import (
    FAMILY_TASKS,
    constant_example,
    experts_reached_only_by,
    onnxruntime_outputs,
    save_tiny_model,
    varied_inputs,
)

onnxruntime = pytest.importorskip("onnxruntime", reason="onnxruntime is missing: install the `export` extra")
pytest.importorskip(
    "onnxscript", reason="onnxscript is missing (torch.onnx dynamo needs it): install the `export` extra"
)

TOLERANCE = 1e-4


def _assert_parity(session, model, inputs, task):
    produced = onnxruntime_outputs(session, inputs)
    with torch.no_grad():
        expected = model(**inputs)
    for name in EXPORT_TASKS[task].outputs:
        scale = max(1.0, float(expected[name].abs().max()))
        difference = float((torch.from_numpy(produced[name]) - expected[name]).abs().max())
        assert difference <= TOLERANCE * scale, f"{name}: |onnx - torch| = {difference} at output scale {scale}"


@pytest.mark.parametrize("config_id", list(FAMILY_TASKS))
def test_dynamo_export_matches_pytorch_on_any_routing_and_shape(config_id, tmp_path):
    _export_and_check_parity(config_id, tmp_path)


@pytest.mark.parametrize("all_experts_max", [8, 1], ids=["all-experts", "gathered"])
@pytest.mark.parametrize("config_id", ["minimoe_moe_attention", "moe_bert"])
def test_static_expert_forms_match_pytorch_too(config_id, all_experts_max, tmp_path, monkeypatch):
    """The tiny models have few experts and export in the routed form; presets with many (moe-bert: 64) export in a
    static form (all experts per token up to ``ALL_EXPERTS_MAX``, gathered above), checked here by lowering the
    thresholds."""
    monkeypatch.setattr(moe_export_form, "ROUTED_EXPERTS_MAX", 1)
    monkeypatch.setattr(moe_export_form, "ALL_EXPERTS_MAX", all_experts_max)
    _export_and_check_parity(config_id, tmp_path)


def _export_and_check_parity(config_id, tmp_path):
    task = FAMILY_TASKS[config_id]
    model = save_tiny_model(config_id, task, tmp_path / "model")
    example = constant_example()
    report = export_onnx(tmp_path / "model", tmp_path / "onnx", task, exporter="dynamo", example_inputs=example)
    assert report.exporter == "dynamo"
    assert {"model.onnx", "config.json", "tokenizer_config.json", "vocab.txt"} <= {
        p.name for p in (tmp_path / "onnx").iterdir()
    }

    session = onnxruntime.InferenceSession(str(report.onnx_path), providers=["CPUExecutionProvider"])
    assert [node.name for node in session.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [node.name for node in session.get_outputs()] == list(EXPORT_TASKS[task].outputs)
    # Dynamic axes: batch 1 and 3, lengths 7 and 64, in one session.
    for batch, seq in ((1, 7), (3, 64), (3, 7), (1, 64)):
        probe = varied_inputs(
            batch, seq, model.config.vocab_size, seed=batch * 100 + seq, pad_last_from=seq // 2 if batch > 1 else None
        )
        _assert_parity(session, model, probe, task)
    if getattr(model.config, "num_experts", 1) > 1:
        probe = varied_inputs(3, 64, model.config.vocab_size, seed=3064, pad_last_from=32)
        assert experts_reached_only_by(tmp_path / "model", probe, example).any(), (
            "the parity input must reach experts the export example never used"
        )


def test_routed_moe_graph_runs_each_expert_on_its_own_tokens_with_its_own_constant_matrices(tmp_path):
    """The routed form (ONNX, up to ``ROUTED_EXPERTS_MAX`` experts): per expert and block one ``NonZero`` selecting
    its tokens, and two ``MatMul`` whose weight is an initializer (no ``Gather`` copying a matrix out of the stack
    on every run, and int8 quantization reaches them); no branch frozen into the graph."""
    import onnx

    model = save_tiny_model("moe_bert", "feature-extraction", tmp_path / "model")
    export_onnx(
        tmp_path / "model",
        tmp_path / "onnx",
        "feature-extraction",
        exporter="dynamo",
        example_inputs=constant_example(),
    )
    graph = onnx.load(str(tmp_path / "onnx" / "model.onnx")).graph
    constants = {init.name for init in graph.initializer}
    config = model.config
    blocks = config.num_hidden_layers  # every layer of the tiny moe_bert is an MoE FFN
    assert [node.op_type for node in graph.node].count("NonZero") == config.num_experts * blocks
    expert_shapes = {
        (config.hidden_size, config.expert_intermediate_size),
        (config.expert_intermediate_size, config.hidden_size),
    }
    expert_products = [
        node
        for node in graph.node
        if node.op_type == "MatMul"
        and node.input[1] in constants
        and tuple(next(i.dims for i in graph.initializer if i.name == node.input[1])) in expert_shapes
    ]
    assert len(expert_products) >= 2 * config.num_experts * blocks
    assert not [node.op_type for node in graph.node if node.op_type in ("If", "Loop")]


def test_static_moe_graph_keeps_every_expert(tmp_path, monkeypatch):
    """In the static form (above ``ROUTED_EXPERTS_MAX`` experts) no per-expert branch is frozen into the graph and
    no per-expert subgraph is unrolled: each block gathers its tokens' experts from the whole stacked weights."""
    import onnx

    monkeypatch.setattr(moe_export_form, "ROUTED_EXPERTS_MAX", 1)
    model = save_tiny_model("moe_bert", "feature-extraction", tmp_path / "model")
    export_onnx(
        tmp_path / "model",
        tmp_path / "onnx",
        "feature-extraction",
        exporter="dynamo",
        example_inputs=constant_example(),
    )
    graph = onnx.load(str(tmp_path / "onnx" / "model.onnx")).graph
    stacked = [
        init for init in graph.initializer if list(init.dims[:1]) == [model.config.num_experts] and len(init.dims) == 3
    ]
    # fc1 and fc2 of every MoE block, whole: stacked [E, out, in], or as the all-experts form's [E * out, in] view
    stacked += [
        init
        for init in graph.initializer
        if len(init.dims) == 2
        and init.dims[0]
        in (
            model.config.num_experts * model.config.intermediate_size,
            model.config.num_experts * model.config.hidden_size,
        )
    ]
    assert len(stacked) == 2 * model.config.num_hidden_layers
    assert not [node.op_type for node in graph.node if node.op_type in ("If", "Loop", "NonZero")]


def test_cli_exports_and_prints_parity(tmp_path, capsys):
    save_tiny_model("minimoe", "text-classification", tmp_path / "model")
    assert (
        main(
            [
                "export",
                "onnx",
                str(tmp_path / "model"),
                str(tmp_path / "onnx"),
                "--task",
                "text-classification",
                "--exporter",
                "dynamo",
                "--opset",
                "18",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert '"exporter": "dynamo"' in printed and (tmp_path / "onnx" / "model.onnx").is_file()
    config = transformers.AutoConfig.from_pretrained(tmp_path / "onnx")
    assert config.model_type == "minimoe" and config.num_labels == 3


def test_export_says_nothing_about_torchvision_or_exporter_internals(tmp_path, capfd):
    import logging
    import warnings

    from tests.log_records import recorded_messages

    save_tiny_model("minimoe", "text-classification", tmp_path / "model")
    with (
        recorded_messages("torch.onnx._internal.exporter._registration", logging.WARNING) as messages,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        export_onnx(
            tmp_path / "model",
            tmp_path / "onnx",
            "text-classification",
            exporter="dynamo",
            example_inputs=constant_example(),
        )
    assert not [message for message in messages if "torchvision" in message]
    assert "[torch.onnx]" not in capfd.readouterr().out  # the exporter's progress lines (8 per graph)
    noise = [
        str(warning.message)
        for warning in caught
        if "LeafSpec" in str(warning.message) or "will not be used, since it shares" in str(warning.message)
    ]
    assert not noise
