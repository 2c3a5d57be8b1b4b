"""Saved folders load through ``trust_remote_code`` in a fresh process that cannot import compact-bert."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap

import torch

from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from compact_bert.modeling.remote_code import collect_remote_code
from tests.conftest import random_batch, tiny_configs

CHILD = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class BlockCompactBert(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "compact_bert" or name.startswith("compact_bert."):
                raise ModuleNotFoundError(f"{name} is blocked in this test")

    sys.meta_path.insert(0, BlockCompactBert())
    import torch, transformers

    cases = json.load(open(sys.argv[1]))
    for case in cases:
        model = getattr(transformers, case["auto_name"]).from_pretrained(case["folder"], trust_remote_code=True)
        model.eval()
        reference = torch.load(case["reference"])
        with torch.no_grad():
            output = getattr(model(**reference["inputs"]), case["output"])
        torch.testing.assert_close(output, reference["expected"])
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    print("loaded", len(cases))
    """
)


def test_every_family_and_head_loads_as_remote_code_without_compact_bert(tmp_path):
    cases = []
    batch = random_batch()
    for config_id in ("ib_bert", "mobilebert_tiny", "minimoe_moe_attention", "minimoe_hash", "moe_bert"):
        config = tiny_configs()[config_id]
        for auto_name, model_class in AUTO_CLASSES_BY_CONFIG[type(config)].items():
            model = model_class(config).eval()
            folder = tmp_path / f"{config_id}-{auto_name}"
            model.save_pretrained(folder)
            output = {"AutoModel": "last_hidden_state", "AutoModelForPreTraining": "prediction_logits",
                      "AutoModelForQuestionAnswering": "start_logits"}.get(auto_name, "logits")  # fmt: skip
            with torch.no_grad():
                expected = getattr(model(**batch), output)
            torch.save({"inputs": batch, "expected": expected}, folder / "reference.pt")
            cases.append({"folder": str(folder), "auto_name": auto_name, "output": output,
                          "reference": str(folder / "reference.pt")})  # fmt: skip
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "child.py").write_text(CHILD)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "cases.json")],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"loaded {len(cases)}" in result.stdout


def test_saved_folder_is_flat_and_declares_auto_map(tmp_path):
    model = AUTO_CLASSES_BY_CONFIG[type(tiny_configs()["minimoe"])]["AutoModelForMaskedLM"](tiny_configs()["minimoe"])
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_minimoe.MiniMoEForMaskedLM"
    assert config["auto_map"]["AutoConfig"] == "configuration_minimoe.MiniMoEConfig"
    allowed = {"__future__", "torch", "transformers", "math", "dataclasses", "typing", "collections", "inspect",
               "json", "re", "sys", "pathlib"}  # fmt: skip
    for python_file in tmp_path.glob("*.py"):
        tree = ast.parse(python_file.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 1 or node.module.split(".")[0] in allowed, (python_file.name, node.module)
                assert node.level <= 1, (python_file.name, node.module)
            elif isinstance(node, ast.Import):
                assert all(alias.name.split(".")[0] in allowed for alias in node.names), python_file.name


def test_flattening_rejects_ambiguous_file_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "entry.py").write_text("from ..b.helpers import x\nfrom .helpers import y\n")
    (tmp_path / "a" / "helpers.py").write_text("y = 1\n")
    (tmp_path / "b" / "helpers.py").write_text("x = 1\n")
    try:
        collect_remote_code(tmp_path / "a" / "entry.py")
    except ValueError as error:
        assert "share the remote-code file name helpers.py" in str(error)
    else:
        raise AssertionError("expected a ValueError")
