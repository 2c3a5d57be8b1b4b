"""Saved folders load through ``trust_remote_code`` in a fresh process that cannot import compact-bert."""

from __future__ import annotations

import ast
import json

import torch

from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from compact_bert.modeling.remote_code import collect_remote_code
from tests.conftest import random_batch, tiny_configs
from tests.remote_code_helpers import load_in_fresh_process

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
    load_in_fresh_process(cases, tmp_path)


def test_saved_folder_is_flat_and_declares_auto_map(tmp_path):
    model = AUTO_CLASSES_BY_CONFIG[type(tiny_configs()["minimoe"])]["AutoModelForMaskedLM"](tiny_configs()["minimoe"])
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_minimoe.MiniMoEForMaskedLM"
    assert config["auto_map"]["AutoConfig"] == "configuration_minimoe.MiniMoEConfig"
    # huggingface_hub is a dependency of transformers itself; the saving mixin (hub_saving.py) imports it.
    allowed = {"__future__", "torch", "transformers", "math", "dataclasses", "typing", "collections", "inspect",
               "json", "re", "sys", "pathlib", "huggingface_hub"}  # fmt: skip
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
