"""Folders saved by compact-bert 0.1.0 (other names for the experts' stacks and the routers' linear maps, kernel fields
in config.json, the code files of that release): refused by name where compact-bert loads a folder, converted by
``compact-bert convert`` into a folder of today's names and code that computes the same."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSequenceClassification

from compact_bert.modeling.conversion import convert_checkpoint
from compact_bert.training.checked_loading import WeightsLoadError, load_checked
from tests.conftest import random_batch, tiny_configs

REPOSITORY = Path(__file__).resolve().parents[2]
RELEASE_0_1 = "218cafd"  # the last commit whose files carry 0.1.0's names
_EARLIER = {
    "router.gate.": "router.classifier.",
    "up_proj_bias": "fc1_bias",
    "down_proj_bias": "fc2_bias",
    "experts.up_proj": "experts.fc1_weight",
    "experts.down_proj": "experts.fc2_weight",
}


def _earlier_code(model_type: str) -> dict[str, bytes]:
    files = {}
    for kind in ("configuration", "modeling"):
        path = f"models/{model_type}/{kind}_{model_type}.py"
        shown = subprocess.run(["git", "show", f"{RELEASE_0_1}:{path}"], cwd=REPOSITORY, capture_output=True)
        if shown.returncode != 0:
            pytest.skip(f"needs the git history of the checkout ({RELEASE_0_1}:{path}): {shown.stderr.decode()[:200]}")
        files[f"{kind}_{model_type}.py"] = shown.stdout
    return files


def _release_0_1_folder(config_id: str, folder: Path):
    """A folder as 0.1.0 saved it: today's model saved, then its weights, config and code rewritten as 0.1.0's."""
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(tiny_configs()[config_id]).eval()
    model.save_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    renamed = {}
    for key, value in weights.items():
        for today, earlier in _EARLIER.items():
            key = key.replace(today, earlier)
        renamed[key] = value
    save_file(renamed, folder / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config.update(dense_implementation="auto", moe_implementation="auto")
    (folder / "config.json").write_text(json.dumps(config))
    for name, text in _earlier_code(model.config.model_type).items():
        (folder / name).write_bytes(text)
    return model


@pytest.mark.parametrize("config_id", ["minimoe", "minimoe_moe_attention", "moe_bert"])
def test_a_release_0_1_folder_is_refused_by_name_and_converts_to_the_same_model(config_id, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACT_BERT_PROBE", "off")  # 0.1.0's code would time its kernels (and write the result)
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    model = _release_0_1_folder(config_id, tmp_path / "old")
    with pytest.raises(WeightsLoadError, match=r"saved by compact-bert 0.1.0.*compact-bert convert .*old NEW_FOLDER"):
        load_checked(AutoModelForSequenceClassification, tmp_path / "old", "MODEL")
    summary = convert_checkpoint(tmp_path / "old", tmp_path / "new")
    assert summary["max_abs_difference"] < 1e-5, summary
    converted = load_checked(AutoModelForSequenceClassification, tmp_path / "new", "MODEL").eval()
    saved = json.loads((tmp_path / "new" / "config.json").read_text())
    assert "moe_implementation" not in saved and "dense_implementation" not in saved
    assert "mkldnn" not in (tmp_path / "new" / f"modeling_{model.config.model_type}.py").read_text()
    batch = random_batch()
    with torch.no_grad():
        torch.testing.assert_close(converted(**batch).logits, model(**batch).logits, rtol=0, atol=1e-6)
