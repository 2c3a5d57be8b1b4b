"""Saved folders hold exactly two self-contained code files that load through ``trust_remote_code`` in a fresh
process that cannot import compact-bert, on this transformers line and the other. They are the files that define
the classes compact-bert runs (``models/<model_type>/``, whose generation ``tests/utils/test_hub_code.py`` tests),
copied by transformers' own saving (``register_for_auto_class``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

import compact_bert.models
from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from tests.conftest import random_batch, tiny_configs
from tests.remote_code_helpers import load_in_fresh_process

CONFIG_IDS = ("ib_bert", "mobilebert_tiny", "minimoe_moe_attention", "minimoe_hash", "moe_bert")
OUTPUT_FIELDS = {
    "AutoModel": "last_hidden_state",
    "AutoModelForPreTraining": "prediction_logits",
    "AutoModelForQuestionAnswering": "start_logits",
}
OTHER_PYTHON = os.environ.get("COMPACT_BERT_OTHER_PYTHON")
MODELS_ROOT = Path(compact_bert.models.__file__).parent


@pytest.fixture(scope="module")
def saved_heads(tmp_path_factory):
    """Every family × every Auto class, saved with a reference output: (cases for the loader, work folder)."""
    work = tmp_path_factory.mktemp("remote_code")
    batch, cases = random_batch(), []
    for config_id in CONFIG_IDS:
        config = tiny_configs()[config_id]
        for auto_name, model_class in AUTO_CLASSES_BY_CONFIG[type(config)].items():
            torch.manual_seed(0)
            model = model_class(config).eval()
            folder = work / f"{config_id}-{auto_name}"
            model.save_pretrained(folder)
            output = OUTPUT_FIELDS.get(auto_name, "logits")
            with torch.no_grad():
                torch.save({"inputs": batch, "expected": getattr(model(**batch), output)}, folder / "reference.pt")
            cases.append(
                {
                    "folder": str(folder),
                    "auto_name": auto_name,
                    "output": output,
                    "reference": str(folder / "reference.pt"),
                    "model_type": config.model_type,
                    "class_name": model_class.__name__,
                    "config_class_name": type(config).__name__,
                    "config_id": config_id,
                }
            )
    return cases, work


def test_every_saved_folder_holds_exactly_the_two_code_files_and_their_auto_map(saved_heads):
    cases, _ = saved_heads
    for case in cases:
        folder, model_type = case["folder"], case["model_type"]
        code_files = sorted(path.name for path in Path(folder).glob("*.py"))
        assert code_files == [f"configuration_{model_type}.py", f"modeling_{model_type}.py"], folder
        auto_map = json.loads((Path(folder) / "config.json").read_text())["auto_map"]
        assert auto_map["AutoConfig"] == f"configuration_{model_type}.{case['config_class_name']}"
        assert auto_map[case["auto_name"]] == f"modeling_{model_type}.{case['class_name']}"
        # Every head of the family, whichever head was saved: an MLM checkpoint loads for classification.
        family = AUTO_CLASSES_BY_CONFIG[type(tiny_configs()[case["config_id"]])]
        assert auto_map == {
            "AutoConfig": auto_map["AutoConfig"],
            **{name: f"modeling_{model_type}.{model_class.__name__}" for name, model_class in family.items()},
        }


def test_every_family_and_head_loads_as_remote_code_without_compact_bert(saved_heads):
    cases, work = saved_heads
    load_in_fresh_process(cases, work / "this-line")


@pytest.mark.skipif(
    OTHER_PYTHON is None,
    reason="set COMPACT_BERT_OTHER_PYTHON to a python with the other transformers line (4.57 ↔ 5.x) to run it",
)
def test_folders_saved_under_this_transformers_line_load_under_the_other(saved_heads):
    cases, work = saved_heads
    load_in_fresh_process(cases, work / "other-line", python=OTHER_PYTHON)


def test_the_classes_compact_bert_runs_are_defined_in_the_files_a_folder_ships(saved_heads):
    """What a folder ships is the committed file that defines the class that was saved, byte for byte, so a
    ``trust_remote_code`` user runs exactly the code compact-bert runs. The generator is not part of the installed
    package: the wheel stage of CI runs this file, so saving there proves it needs none."""
    cases, _ = saved_heads
    for case in cases:
        config = tiny_configs()[case["config_id"]]
        model_class = AUTO_CLASSES_BY_CONFIG[type(config)][case["auto_name"]]
        assert Path(sys.modules[model_class.__module__].__file__) == MODELS_ROOT / case["model_type"] / (
            f"modeling_{case['model_type']}.py"
        )
        assert Path(sys.modules[type(config).__module__].__file__).parent == MODELS_ROOT / case["model_type"]
        for name in (f"configuration_{case['model_type']}.py", f"modeling_{case['model_type']}.py"):
            committed = MODELS_ROOT / case["model_type"] / name
            assert (Path(case["folder"]) / name).read_bytes() == committed.read_bytes(), name


def test_a_folder_saved_from_one_head_loads_as_another_without_compact_bert(tmp_path):
    """Pre-training saves a masked-LM model, and a user loads its encoder (or adds a classifier) through remote code:
    ``auto_map`` names every head whichever was saved."""
    config = tiny_configs()["minimoe"]
    family = AUTO_CLASSES_BY_CONFIG[type(config)]
    torch.manual_seed(0)
    masked_lm = family["AutoModelForMaskedLM"](config).eval()
    masked_lm.save_pretrained(tmp_path / "mlm")
    batch = random_batch()
    with torch.no_grad():
        expected = masked_lm.base_model(**batch).last_hidden_state
    torch.save({"inputs": batch, "expected": expected}, tmp_path / "reference.pt")
    case = {"folder": str(tmp_path / "mlm"), "auto_name": "AutoModel", "output": "last_hidden_state"}
    load_in_fresh_process([{**case, "reference": str(tmp_path / "reference.pt")}], tmp_path / "child")
    auto_map = json.loads((tmp_path / "mlm" / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForSequenceClassification"] == "modeling_minimoe.MiniMoEForSequenceClassification"


def test_a_saved_config_with_a_field_nobody_defines_is_refused_as_remote_code(tmp_path):
    """The folder's own configuration file refuses an unknown field too, in a process without compact-bert."""
    import subprocess

    from transformers import AutoModel

    from tests.remote_code_helpers import BLOCK_COMPACT_BERT

    AutoModel.from_config(tiny_configs()["minimoe"]).save_pretrained(tmp_path / "model")
    saved = json.loads((tmp_path / "model" / "config.json").read_text())
    (tmp_path / "model" / "config.json").write_text(json.dumps({**saved, "num_layers": 7}))
    child = BLOCK_COMPACT_BERT + (
        "import transformers\n"
        "try:\n"
        f"    transformers.AutoConfig.from_pretrained({str(tmp_path / 'model')!r}, trust_remote_code=True)\n"
        "except ValueError as error:\n"
        "    print('REFUSED', error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        timeout=300,
        env={"HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "PATH": "/usr/bin:/bin"},
    )
    assert "REFUSED MiniMoEConfig: unknown field `num_layers`" in result.stdout, result.stdout + result.stderr[-3000:]
    assert "compact-bert calls it `num_hidden_layers`" in result.stdout
