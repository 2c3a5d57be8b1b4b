"""PEFT adapters on every family: default targets, expert LoRA, saved adapters, legacy router keys, bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import transformers
from peft import AutoPeftModelForSequenceClassification, IA3Config, LoraConfig, PeftModel, get_peft_model
from peft.utils.constants import (
    TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING,
    TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING,
    TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING,
)
from safetensors.torch import load_file
from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification

from compact_bert.finetuning import COMPACT_BERT_MODEL_TYPES
from compact_bert.finetuning.peft_support import (
    adaptable_linear_module_names,
    build_peft_config,
    router_module_names,
)
from tests.conftest import random_batch, tiny_configs

MOE_ATTENTION = "minimoe_moe_attention"
PLAIN_DEFAULT_IDS = [config_id for config_id in tiny_configs() if config_id != MOE_ATTENTION]
MOE_IDS = ["minimoe", MOE_ATTENTION, "moe_bert"]
LABELS = torch.tensor([0, 1, 0])


def _classifier(config_id: str):
    return AutoModelForSequenceClassification.from_config(tiny_configs()[config_id])


def _trainable(model) -> list[str]:
    return [name for name, parameter in model.named_parameters() if parameter.requires_grad]


def _logits(model) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(**random_batch()).logits


def _train_one_step(model) -> None:
    """One SGD step with a large learning rate, so that every adapter weight (LoRA B starts at 0) moves."""
    model.train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    model(**random_batch(), labels=LABELS).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def test_our_model_types_are_registered_with_peft_as_bert():
    for model_type in COMPACT_BERT_MODEL_TYPES:
        assert TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING[model_type] == ["query", "value"]
        assert TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING[model_type] == ["key", "value", "output.dense"]
        assert TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING[model_type] == ["output.dense"]


def test_registration_waits_for_peft_when_compact_bert_is_imported_first(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        import compact_bert
        assert "peft" not in sys.modules, "importing compact_bert must not import peft"
        from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as lora
        assert lora["moe_bert"] == ["query", "value"], lora.get("moe_bert")
        print("registered")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "registered" in result.stdout, result.stderr[-3000:]


@pytest.mark.parametrize("config_id", PLAIN_DEFAULT_IDS)
def test_default_lora_trains_query_value_and_the_head_never_a_router(config_id, tmp_path):
    model = get_peft_model(_classifier(config_id), LoraConfig(task_type="SEQ_CLS"))
    trainable = _trainable(model)
    assert trainable and all(("lora_" in name or ".classifier.modules_to_save." in name) for name in trainable)
    assert {"query", "value"} == {name.split(".lora_")[0].rpartition(".")[2] for name in trainable if "lora_" in name}
    assert any(".classifier.modules_to_save." in name for name in trainable)
    model.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "adapter_model.safetensors")
    assert not [key for key in saved if "router" in key or "experts" in key]
    assert any(key.endswith("classifier.weight") for key in saved)


@pytest.mark.parametrize("config_id", ["minimoe", MOE_ATTENTION])
def test_routers_are_never_adapted_by_our_configs(config_id):
    model = _classifier(config_id)
    routers = router_module_names(model)
    assert routers and all(name.endswith("router.gate") for name in routers)
    assert "gate" not in adaptable_linear_module_names(model)
    peft_model = get_peft_model(model, build_peft_config("lora", model, target_modules="all-linear"))
    assert not [name for name in _trainable(peft_model) if "router" in name]


@pytest.mark.parametrize("config_id", MOE_IDS)
def test_expert_lora_trains_adapters_only_and_merges_to_a_plain_checkpoint(config_id, tmp_path):
    model = _classifier(config_id)
    frozen = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    config = build_peft_config("lora", model)
    assert "experts.up_proj" in config.target_parameters and config.lora_dropout == 0
    peft_model = get_peft_model(model, config)

    peft_model.train()
    peft_model(**random_batch(), labels=LABELS).loss.backward()
    expert_adapters = {
        name: parameter for name, parameter in peft_model.named_parameters() if "lora_" in name and "experts" in name
    }
    assert expert_adapters and all(parameter.grad is not None for parameter in expert_adapters.values())
    assert any(parameter.grad.abs().sum() > 0 for name, parameter in expert_adapters.items() if "lora_B" in name)
    _train_one_step(peft_model)
    base = peft_model.get_base_model()
    for name, parameter in base.named_parameters():
        if "lora_" in name or "modules_to_save" in name:
            continue
        original = re.sub(r"(base_layer|original_module)\.", "", name)
        assert original in frozen, name
        torch.testing.assert_close(parameter, frozen[original], rtol=0, atol=0, msg=name)
    assert not torch.equal(_logits(peft_model), _logits(_plain_copy(model, frozen)))

    adapted = _logits(peft_model)
    merged = peft_model.merge_and_unload()
    torch.testing.assert_close(_logits(merged), adapted, rtol=0, atol=1e-5)
    merged.save_pretrained(tmp_path / "merged")
    keys = set(load_file(tmp_path / "merged" / "model.safetensors"))
    assert not [key for key in keys if "lora" in key or "base_layer" in key or "modules_to_save" in key]
    reloaded, info = AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    torch.testing.assert_close(_logits(reloaded), adapted, rtol=0, atol=1e-5)


def _plain_copy(model, state_dict):
    copy = AutoModelForSequenceClassification.from_config(model.config)
    copy.load_state_dict(state_dict)
    return copy


def test_a_saved_adapter_reloads_here_and_as_remote_code_without_compact_bert(tmp_path):
    cases = []
    for config_id in ("ib_bert", MOE_ATTENTION):
        base_dir, adapter_dir = tmp_path / f"{config_id}-base", tmp_path / f"{config_id}-adapter"
        _classifier(config_id).save_pretrained(base_dir)
        base = AutoModelForSequenceClassification.from_pretrained(base_dir)
        peft_model = get_peft_model(base, build_peft_config("lora", base))
        _train_one_step(peft_model)
        expected = _logits(peft_model)
        peft_model.save_pretrained(adapter_dir)
        assert json.loads((adapter_dir / "adapter_config.json").read_text())["base_model_name_or_path"] == str(
            base_dir
        )

        reloaded = AutoPeftModelForSequenceClassification.from_pretrained(adapter_dir)
        assert isinstance(reloaded, PeftModel)
        torch.testing.assert_close(_logits(reloaded), expected, rtol=0, atol=0)
        reference = tmp_path / f"{config_id}-reference.pt"
        torch.save({"inputs": random_batch(), "expected": expected}, reference)
        cases.append({"adapter": str(adapter_dir), "reference": str(reference)})
    _load_adapters_in_fresh_process(cases, tmp_path)


ADAPTER_CHILD = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class BlockCompactBert(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "compact_bert" or name.startswith("compact_bert."):
                raise ModuleNotFoundError(f"{name} is blocked in this test")

    sys.meta_path.insert(0, BlockCompactBert())
    import torch
    from peft import AutoPeftModelForSequenceClassification

    for case in json.load(open(sys.argv[1])):
        model = AutoPeftModelForSequenceClassification.from_pretrained(case["adapter"], trust_remote_code=True).eval()
        assert type(model.get_base_model()).__module__.startswith("transformers_modules")
        reference = torch.load(case["reference"])
        with torch.no_grad():
            torch.testing.assert_close(model(**reference["inputs"]).logits, reference["expected"], rtol=0, atol=0)
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    print("loaded adapters")
    """
)


def _load_adapters_in_fresh_process(cases: list[dict], work_dir: Path) -> None:
    (work_dir / "cases.json").write_text(json.dumps(cases))
    (work_dir / "child.py").write_text(ADAPTER_CHILD)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(work_dir / "modules")}
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, str(work_dir / "child.py"), str(work_dir / "cases.json")],
        cwd=work_dir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0 and "loaded adapters" in result.stdout, result.stderr[-4000:]


@pytest.mark.parametrize("config_id", ["mobilebert", "moe_bert"])
def test_default_ia3_scales_key_value_and_ffn_output(config_id, tmp_path):
    _classifier(config_id).save_pretrained(tmp_path / "base")
    base = AutoModelForSequenceClassification.from_pretrained(tmp_path / "base")
    model = get_peft_model(base, IA3Config(task_type="SEQ_CLS"))
    trainable = _trainable(model)
    adapted = {name.split(".ia3_l")[0].rpartition(".")[2] for name in trainable if "ia3_l" in name}
    assert adapted == {"key", "value", "dense"}
    assert not [name for name in trainable if "router" in name or "experts" in name]
    built = build_peft_config("ia3", _classifier(config_id))
    assert isinstance(built, IA3Config) and set(built.feedforward_modules) == {"output.dense"}
    _train_one_step(model)
    model.save_pretrained(tmp_path / "adapter")
    reloaded = AutoPeftModelForSequenceClassification.from_pretrained(tmp_path / "adapter")
    torch.testing.assert_close(_logits(reloaded), _logits(model), rtol=0, atol=0)


def test_question_answering_head_is_trained_and_saved(tmp_path):
    model = AutoModelForQuestionAnswering.from_config(tiny_configs()["minimoe"])
    config = build_peft_config("lora", model)
    assert config.task_type == "QUESTION_ANS"
    peft_model = get_peft_model(model, config)
    assert any("qa_outputs.modules_to_save" in name for name in _trainable(peft_model))
    peft_model.save_pretrained(tmp_path)
    assert any("qa_outputs" in key for key in load_file(tmp_path / "adapter_model.safetensors"))


def test_unknown_method_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"Unknown PEFT method 'houlsby'; valid methods: lora, ia3"):
        build_peft_config("houlsby", _classifier("minimoe"))


def test_target_names_that_match_nothing_are_named():
    with pytest.raises(ValueError, match=r"\['q_proj', 'v_proj'\] match no module"):
        build_peft_config("lora", _classifier("moe_bert"), target_modules=["query", "q_proj", "v_proj"])


def test_experts_as_a_target_module_means_their_stacked_weights():
    model = _classifier("moe_bert")
    config = build_peft_config("lora", model, target_modules=["experts"], adapt_experts=False)
    assert not config.target_modules and config.target_parameters == ["experts.up_proj", "experts.down_proj"]
    peft_model = get_peft_model(model, config)
    adapted = {re.sub(r"\.base_layer|\.lora_.*", "", name) for name in _trainable(peft_model) if "lora_" in name}
    assert adapted and all(name.endswith(".moe.experts") for name in adapted)
    with pytest.raises(ValueError, match="ia3 adapts nn.Linear only"):
        build_peft_config("ia3", _classifier("moe_bert"), target_modules=["experts"])
    with pytest.raises(ValueError, match="cannot apply dropout"):
        build_peft_config("lora", _classifier("moe_bert"), dropout=0.1)


def test_plain_peft_on_experts_names_the_way_out():
    """PEFT itself rejects a stacked-expert module; its message shows our repr, which says what to do."""
    with pytest.raises(ValueError, match=r"target_parameters=\['experts.up_proj', 'experts.down_proj'\]"):
        get_peft_model(_classifier("moe_bert"), LoraConfig(target_modules=["experts"]))
    with pytest.raises(ValueError, match=r"target_parameters=\['<name>.weight'\]"):
        get_peft_model(_classifier(MOE_ATTENTION), LoraConfig(task_type="SEQ_CLS"))


def test_transformers_bert_gets_the_same_adapter_as_from_peft_defaults():
    """``compact-bert finetune --peft`` also takes BERT-like transformers folders (the vanilla teacher of paper
    003): our config adapts exactly what PEFT's own BERT defaults adapt."""
    config = transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, num_labels=2
    )
    for method, peft_default in (("lora", LoraConfig(task_type="SEQ_CLS")), ("ia3", IA3Config(task_type="SEQ_CLS"))):
        torch.manual_seed(0)
        model = transformers.BertForSequenceClassification(config)
        ours = get_peft_model(model, build_peft_config(method, model))
        torch.manual_seed(0)
        reference = get_peft_model(transformers.BertForSequenceClassification(config), peft_default)
        assert _trainable(ours) == _trainable(reference)
        assert any(".classifier.modules_to_save." in name for name in _trainable(ours))
