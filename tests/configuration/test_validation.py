"""Every bad config field fails at construction with a ValueError naming the field."""

from __future__ import annotations

import pytest

from compact_bert.configuration import (
    CompactMobileBertConfig,
    IBBertConfig,
    MiniMoEConfig,
    MoEBertConfig,
    preset_config,
)

BAD_FIELDS = [
    (MiniMoEConfig, {"hidden_size": 100, "num_attention_heads": 12}, "hidden_size"),
    (MiniMoEConfig, {"num_experts": 0}, "num_experts"),
    (MiniMoEConfig, {"num_attention_experts": -1}, "num_attention_experts"),
    (MiniMoEConfig, {"capacity_factor": 0}, "capacity_factor"),
    (MiniMoEConfig, {"capacity_factor": -1.25}, "capacity_factor"),
    (MiniMoEConfig, {"eval_capacity_factor": 0.0}, "eval_capacity_factor"),
    (MiniMoEConfig, {"router_type": "top2"}, "router_type"),
    (MiniMoEConfig, {"router_aux_loss_type": "z_loss"}, "router_aux_loss_type"),
    (MiniMoEConfig, {"router_aux_loss_coef": -0.01}, "router_aux_loss_coef"),
    (MiniMoEConfig, {"hidden_act": "swishy"}, "hidden_act"),
    (MiniMoEConfig, {"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
    (MiniMoEConfig, {"hash_seed": -3}, "hash_seed"),
    (MiniMoEConfig, {"num_hidden_layers": 0}, "num_hidden_layers"),
    (MoEBertConfig, {"num_experts": 0}, "num_experts"),
    (MoEBertConfig, {"intermediate_size": 2.5}, "intermediate_size"),
    (CompactMobileBertConfig, {"intra_bottleneck_size": 1024}, "intra_bottleneck_size"),
    (CompactMobileBertConfig, {"intra_bottleneck_size": 130}, "intra_bottleneck_size"),
    (CompactMobileBertConfig, {"normalization_type": "batch_norm"}, "normalization_type"),
    (CompactMobileBertConfig, {"hidden_act": "nope"}, "hidden_act"),
    (CompactMobileBertConfig, {"attention_input": "everything"}, "attention_input"),
    (CompactMobileBertConfig, {"use_bottleneck": False, "attention_input": "shared_bottleneck"}, "attention_input"),
    (CompactMobileBertConfig, {"num_feedforward_networks": 0}, "num_feedforward_networks"),
    (CompactMobileBertConfig, {"attention_probs_dropout_prob": -0.1}, "attention_probs_dropout_prob"),
    (IBBertConfig, {"intra_bottleneck_size": 256}, "intra_bottleneck_size"),
    (IBBertConfig, {"num_attention_heads": 3}, "intra_bottleneck_size"),
    (IBBertConfig, {"layer_norm_eps": 0}, "layer_norm_eps"),
    # Types, ranges and names that were once accepted silently (strings for booleans, inf, bad ids, typos).
    (MiniMoEConfig, {"use_auxiliary_attention": "false"}, "use_auxiliary_attention"),
    (CompactMobileBertConfig, {"trigram_input": "no"}, "trigram_input"),
    (CompactMobileBertConfig, {"use_bottleneck": 1}, "use_bottleneck"),
    (MiniMoEConfig, {"pad_token_id": -5}, "pad_token_id"),
    (MiniMoEConfig, {"pad_token_id": 30522}, "pad_token_id"),
    (IBBertConfig, {"pad_token_id": 1.5}, "pad_token_id"),
    (MiniMoEConfig, {"layer_norm_eps": float("inf")}, "layer_norm_eps"),
    (MiniMoEConfig, {"initializer_range": float("nan")}, "initializer_range"),
    (MoEBertConfig, {"initializer_range": float("inf")}, "initializer_range"),
    (MoEBertConfig, {"router_aux_loss_coef": float("inf")}, "router_aux_loss_coef"),
    (MiniMoEConfig, {"capacity_factor": float("inf")}, "capacity_factor"),
    (MiniMoEConfig, {"num_expert": 8}, "num_expert"),
    (MoEBertConfig, {"router_aux_los_coef": 10.0}, "router_aux_los_coef"),
    (CompactMobileBertConfig, {"num_feedforward_network": 2}, "num_feedforward_network"),
]


@pytest.mark.parametrize(("config_class", "fields", "field_name"), BAD_FIELDS)
def test_bad_field_raises_value_error_naming_it(config_class, fields, field_name):
    with pytest.raises(ValueError, match=f"`{field_name}`") as error:
        config_class(**fields)
    assert config_class.__name__ in str(error.value)


def test_error_message_says_what_is_valid():
    with pytest.raises(ValueError, match="one of 'hash', 'top1'"):
        MiniMoEConfig(router_type="top2")
    with pytest.raises(ValueError, match="a finite number > 0 or None"):
        MiniMoEConfig(capacity_factor=0)


def test_unknown_preset_lists_valid_names():
    with pytest.raises(ValueError, match="mobilebert-tiny"):
        preset_config("mobilebert-huge")


def test_round_trip_keeps_every_field(tmp_path):
    config = MiniMoEConfig(num_experts=8, router_type="hash", capacity_factor=None, hash_seed=7)
    config.save_pretrained(tmp_path)
    loaded = MiniMoEConfig.from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()


def test_misspelt_field_suggests_the_real_one():
    with pytest.raises(ValueError, match="did you mean `num_experts`"):
        MiniMoEConfig(num_expert=8)


def test_fields_nobody_defines_are_refused_and_transformers_keys_pass():
    """An attribute neither the family nor transformers defines would be stored and ignored: refused,
    naming it; transformers' own keys (of either line: ``num_labels``, ``finetuning_task``, ``torch_dtype``) pass."""
    with pytest.raises(ValueError, match=r"MiniMoEConfig: unknown field `my_project_note` .*its fields: "):
        MiniMoEConfig(my_project_note="kept")
    config = MiniMoEConfig(num_labels=3, finetuning_task="sst2", torch_dtype="float32", _private_note=1)
    assert config.num_labels == 3 and config.finetuning_task == "sst2"


def test_what_transformers_takes_is_read_from_this_line_not_from_a_list():
    """Every key of this transformers line's own ``config.json`` and the arguments its ``PretrainedConfig`` consumes
    pass without compact-bert listing them; a name that is one of its methods is no field and is refused."""
    from transformers import PretrainedConfig

    written = {key: value for key, value in PretrainedConfig().to_dict().items() if key != "model_type"}
    config = MiniMoEConfig(**written, attn_implementation="eager", torch_dtype="float32")
    assert config.to_dict()["num_experts"] == 4 and config._attn_implementation == "eager"
    with pytest.raises(ValueError, match=r"MiniMoEConfig: unknown field `to_dict`"):
        MiniMoEConfig(to_dict={})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("bogus_field", 1, r"unknown field `bogus_field` \(in config\.json"),
        ("num_layers", 7, r"unknown field `num_layers` .*compact-bert calls it `num_hidden_layers`"),
        ("num_expert", 8, r"unknown field `num_expert` .*did you mean `num_experts`\?"),
    ],
)
@pytest.mark.parametrize("config_class", [MiniMoEConfig, MoEBertConfig, CompactMobileBertConfig, IBBertConfig])
def test_a_saved_config_with_a_field_nobody_defines_is_refused_on_load(tmp_path, config_class, field, value, message):
    import json

    from transformers import AutoConfig

    config_class().save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    if field == "num_expert" and "num_experts" not in saved:
        pytest.skip("a dense family has no `num_experts` to suggest")
    (tmp_path / "config.json").write_text(json.dumps({**saved, field: value}))
    with pytest.raises(ValueError, match=message):
        AutoConfig.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("config_class", "field", "value"),
    [
        (MiniMoEConfig, "num_experts", -1),
        (MoEBertConfig, "capacity_factor", 0),
        (CompactMobileBertConfig, "intra_bottleneck_size", 0),
        (IBBertConfig, "num_attention_heads", 0),
    ],
)
def test_a_load_keyword_is_validated_as_the_constructor_validates_it(tmp_path, config_class, field, value):
    """``from_pretrained(folder, field=value)`` sets the keyword after the config's ``__init__``: it is refused all
    the same, naming the field, instead of building a model that drops the saved weights (a MiniMoE folder loaded
    with ``num_experts=-1`` became a random dense FFN) — through compact-bert and through the folder's remote code."""
    import json
    import os
    import subprocess
    import sys

    from transformers import AutoConfig, AutoModel

    small = {"num_hidden_layers": 1, "vocab_size": 64, "max_position_embeddings": 32}
    with pytest.raises(ValueError, match=field):
        config_class(**{**small, field: value})
    AutoModel.from_config(config_class(**small)).save_pretrained(tmp_path / "folder")
    with pytest.raises(ValueError, match=rf"`{field}`"):
        AutoConfig.from_pretrained(tmp_path / "folder", **{field: value})
    with pytest.raises(ValueError, match=rf"`{field}`"):
        AutoModel.from_pretrained(tmp_path / "folder", **{field: value})
    from tests.remote_code_helpers import BLOCK_COMPACT_BERT

    child = BLOCK_COMPACT_BERT + (
        "import transformers\n"
        "try:\n"
        f"    transformers.AutoModel.from_pretrained(sys.argv[1], trust_remote_code=True, **{{{field!r}: {value!r}}})\n"
        "except ValueError as error:\n"
        f"    assert {field!r} in str(error), error\n"
        "    print('refused')\n"
    )
    (tmp_path / "child.py").write_text(child)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "folder")],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")},
        timeout=300,
    )
    assert "refused" in result.stdout, result.stderr[-2000:]
    assert json.loads((tmp_path / "folder" / "config.json").read_text())["model_type"] == config_class.model_type
