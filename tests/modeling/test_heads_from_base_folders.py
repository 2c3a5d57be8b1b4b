"""Every head of every family loads from a base-model folder (what ``distill minimoe``, ``distill embeddings`` and
MoE-BERT pre-training leave behind) with nothing left on the meta device, on the transformers line the suite runs
under, with compact-bert and as remote code.

On transformers 5 a masked-LM head whose decoder bias is aliased to ``cls.predictions.bias`` in ``__init__`` keeps
that bias on the meta device when the folder holds neither: ``pretrain --init_from`` then dies with "Cannot copy out
of meta tensor" and the forward fails."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoModel

from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from tests.conftest import random_batch, tiny_configs
from tests.remote_code_helpers import BLOCK_COMPACT_BERT

FAMILIES = ["minimoe", "moe_bert", "mobilebert", "ib_bert"]


def _meta_tensors(model: torch.nn.Module) -> list[str]:
    tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return [name for name, tensor in tensors if tensor.device.type == "meta"]


def _check_head(model: torch.nn.Module) -> None:
    assert not _meta_tensors(model), _meta_tensors(model)
    predictions = getattr(getattr(model, "cls", None), "predictions", None)
    if predictions is not None:
        # The decoder's bias is the head's bias (tied), initialized to zeros since the folder has none.
        assert predictions.decoder.bias is predictions.bias
        assert torch.count_nonzero(predictions.bias) == 0
    with torch.no_grad():
        outputs = model.eval()(**random_batch())
    first = outputs[0] if isinstance(outputs, tuple) else next(iter(outputs.values()))
    assert torch.isfinite(first).all()


@pytest.fixture(scope="module")
def base_folders(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("base_folders")
    folders = {}
    for family in FAMILIES:
        torch.manual_seed(0)
        AutoModel.from_config(tiny_configs()[family]).save_pretrained(root / family)
        folders[family] = root / family
    return folders


@pytest.mark.parametrize("family", FAMILIES)
def test_every_head_loads_from_a_base_model_folder_with_compact_bert(base_folders, family):
    heads = AUTO_CLASSES_BY_CONFIG[type(tiny_configs()[family])]
    assert {"AutoModelForMaskedLM", "AutoModelForSequenceClassification"} <= set(heads)
    for auto_name in heads:
        import transformers

        model = getattr(transformers, auto_name).from_pretrained(base_folders[family])
        _check_head(model)


def test_every_head_loads_from_a_base_model_folder_as_remote_code(base_folders, tmp_path):
    """The same in a process where compact-bert cannot be imported: the folder's own code, ``trust_remote_code``."""
    cases = [
        {"folder": str(base_folders[family]), "heads": list(AUTO_CLASSES_BY_CONFIG[type(tiny_configs()[family])])}
        for family in FAMILIES
    ]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    torch.save(random_batch(), tmp_path / "batch.pt")
    child = BLOCK_COMPACT_BERT + textwrap.dedent(
        """
        import torch, transformers

        batch = torch.load(sys.argv[2])
        loaded = 0
        for case in json.load(open(sys.argv[1])):
            for auto_name in case["heads"]:
                model = getattr(transformers, auto_name).from_pretrained(case["folder"], trust_remote_code=True)
                tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
                meta = [name for name, tensor in tensors if tensor.device.type == "meta"]
                assert not meta, (case["folder"], auto_name, meta)
                assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
                with torch.no_grad():
                    model.eval()(**batch)
                loaded += 1
        print("loaded", loaded)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "cases.json"), str(tmp_path / "batch.pt")],
        capture_output=True,
        text=True,
        timeout=600,
        env={"HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert f"loaded {sum(len(case['heads']) for case in cases)}" in result.stdout


def test_a_masked_lm_head_keeps_its_trained_bias_through_save_and_load(tmp_path):
    """The tie is the same parameter after loading a masked-LM folder: its trained bias, not zeros."""
    import transformers

    model = transformers.AutoModelForMaskedLM.from_config(tiny_configs()["minimoe"])
    with torch.no_grad():
        model.cls.predictions.bias.normal_()
    model.save_pretrained(tmp_path / "mlm")
    loaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm")
    assert loaded.cls.predictions.decoder.bias is loaded.cls.predictions.bias
    torch.testing.assert_close(loaded.cls.predictions.bias, model.cls.predictions.bias)
