"""Optimum's ONNX exporter (transformers 4.57 + the `onnx` extra) on every family and task, with no extra
arguments: ``main_export`` in process, the real ``optimum-cli`` in a subprocess, and ``ORTModelFor*`` loading the
result and predicting what PyTorch predicts (|difference| ≤ 1e-4 × max(1, output scale), fp32)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from compact_bert.export.tasks import EXPORT_TASKS, OPTIMUM_TASKS
from tests.export.helpers import save_tiny_model, varied_inputs

pytest.importorskip(
    "optimum.exporters.onnx", reason="Optimum's ONNX exporter needs the `onnx` extra (transformers 4.57)"
)
optimum_onnxruntime = pytest.importorskip("optimum.onnxruntime")

REPOSITORY = Path(__file__).resolve().parents[2]
FAMILIES = ["ib_bert", "mobilebert", "minimoe", "moe_bert"]
TOLERANCE = 1e-4


def _assert_ort_model_matches(model_dir: Path, onnx_dir: Path, task: str, model) -> None:
    ort_model = getattr(optimum_onnxruntime, EXPORT_TASKS[task].ort_model_class).from_pretrained(onnx_dir)
    probe = varied_inputs(3, 40, model.config.vocab_size, seed=11, pad_last_from=20)
    with torch.no_grad():
        expected = model(**probe)
    produced = ort_model(**probe)
    for name in EXPORT_TASKS[task].outputs:
        scale = max(1.0, float(expected[name].abs().max()))
        difference = float((torch.as_tensor(produced[name]) - expected[name]).abs().max())
        assert difference <= TOLERANCE * scale, f"{task} {name}: |ort - torch| = {difference} at scale {scale}"


# Every family × task, plus the routing variants (hash routing, MoE attention) on one task: the head does not
# change the MoE graph.
MAIN_EXPORT_CASES = [(family, task) for family in FAMILIES for task in OPTIMUM_TASKS] + [
    ("minimoe_hash", "text-classification"),
    ("minimoe_moe_attention", "text-classification"),
]


@pytest.mark.parametrize("config_id,task", MAIN_EXPORT_CASES)
def test_main_export_without_extra_arguments(config_id, task, tmp_path):
    from optimum.exporters.onnx import main_export

    model = save_tiny_model(config_id, task, tmp_path / "model")
    main_export(str(tmp_path / "model"), output=str(tmp_path / "onnx"), task=task)
    _assert_ort_model_matches(tmp_path / "model", tmp_path / "onnx", task, model)


def _optimum_cli_environment(tmp_path: Path) -> dict:
    """The environment of a process where compact-bert is installed: an editable or wheel install places
    ``export/optimum_cli_register/*.py`` in Optimum's ``optimum.commands.register`` namespace (pyproject's
    package-dir); here a namespace folder on PYTHONPATH stands in for that install."""
    namespace = tmp_path / "site" / "optimum" / "commands" / "register"
    namespace.mkdir(parents=True)
    for plugin in (REPOSITORY / "export" / "optimum_cli_register").glob("*.py"):
        shutil.copy2(plugin, namespace / plugin.name)
    environment = dict(os.environ, HF_HUB_OFFLINE="1")
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(tmp_path / "site"), *filter(None, environment.get("PYTHONPATH", "").split(os.pathsep))]
    )
    return environment


def test_pyproject_installs_the_optimum_cli_plugin():
    text = (REPOSITORY / "pyproject.toml").read_text()
    assert '"optimum.commands.register" = "export/optimum_cli_register"' in text
    assert '"optimum.commands.register"]' in text or '"optimum.commands.register",' in text
    assert not (REPOSITORY / "export" / "optimum_cli_register" / "__init__.py").exists(), "PEP 420 namespace"


# One export per family through the real command line, all in one process (an interpreter start each would add
# about 10 s per family): the plugin must register every model type.
CLI_EXPORT_CASES = [
    ("ib_bert", "question-answering"),
    ("mobilebert", "token-classification"),
    ("minimoe", "fill-mask"),
    ("moe_bert", "feature-extraction"),
]
OPTIMUM_CLI_RUNS = """
import json, sys
from optimum.commands.optimum_cli import main
for argv in json.loads(sys.argv[1]):
    sys.argv = ["optimum-cli", *argv]
    main()
"""


def test_optimum_cli_exports_every_family(tmp_path):
    models = {
        config_id: save_tiny_model(config_id, task, tmp_path / config_id / "model")
        for config_id, task in CLI_EXPORT_CASES
    }
    runs = [
        [
            "export",
            "onnx",
            "--model",
            str(tmp_path / config_id / "model"),
            "--task",
            task,
            str(tmp_path / config_id / "onnx"),
        ]
        for config_id, task in CLI_EXPORT_CASES
    ]
    result = subprocess.run(
        [sys.executable, "-c", OPTIMUM_CLI_RUNS, json.dumps(runs)],
        env=_optimum_cli_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for config_id, task in CLI_EXPORT_CASES:
        _assert_ort_model_matches(
            tmp_path / config_id / "model", tmp_path / config_id / "onnx", task, models[config_id]
        )


def test_ort_optimizer_keeps_predictions(tmp_path):
    from optimum.exporters.onnx import main_export
    from optimum.onnxruntime import ORTModelForSequenceClassification, ORTOptimizer
    from optimum.onnxruntime.configuration import OptimizationConfig

    model = save_tiny_model("moe_bert", "text-classification", tmp_path / "model")
    main_export(str(tmp_path / "model"), output=str(tmp_path / "onnx"), task="text-classification")
    optimizer = ORTOptimizer.from_pretrained(ORTModelForSequenceClassification.from_pretrained(tmp_path / "onnx"))
    optimizer.optimize(OptimizationConfig(optimization_level=2), save_dir=tmp_path / "optimized")
    shutil.copy2(tmp_path / "onnx" / "config.json", tmp_path / "optimized" / "config.json")
    optimized = ORTModelForSequenceClassification.from_pretrained(
        tmp_path / "optimized", file_name="model_optimized.onnx"
    )
    probe = varied_inputs(3, 40, model.config.vocab_size, seed=5, pad_last_from=20)
    with torch.no_grad():
        expected = model(**probe).logits
    assert torch.allclose(torch.as_tensor(optimized(**probe).logits), expected, atol=1e-4)


def test_compact_bert_export_goes_through_optimum_here(tmp_path):
    from compact_bert.export.onnx_exporter import export_onnx

    save_tiny_model("minimoe", "token-classification", tmp_path / "model")
    report = export_onnx(tmp_path / "model", tmp_path / "onnx", "token-classification")
    assert report.exporter == "optimum" and report.max_abs_diff <= TOLERANCE * report.output_scale


@pytest.mark.parametrize("config_id,task", [("mobilebert", "fill-mask"), ("moe_bert", "question-answering")])
def test_dynamo_exported_folder_loads_with_ort_model(config_id, task, tmp_path):
    """The transformers-5 path writes the folder layout Optimum's ORTModelFor* classes read."""
    from compact_bert.export.onnx_exporter import export_onnx

    model = save_tiny_model(config_id, task, tmp_path / "model")
    export_onnx(tmp_path / "model", tmp_path / "onnx", task, exporter="dynamo")
    _assert_ort_model_matches(tmp_path / "model", tmp_path / "onnx", task, model)
