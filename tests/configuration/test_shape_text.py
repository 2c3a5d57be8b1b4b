"""The one wording of a model's shape: the depth budget's reasons, the main job's report and the model card."""

from __future__ import annotations

import transformers

from compact_bert.configuration.shape_text import counted, describe_shape, describe_width
from compact_bert.finetuning.depth_budget import narrowed_shapes


def test_a_count_of_one_is_singular():
    assert counted(1, "layer") == "1 layer" and counted(3, "head") == "3 heads" and counted(0, "layer") == "0 layers"


def test_a_bert_config_is_described_from_its_own_fields():
    config = transformers.BertConfig(
        num_hidden_layers=3, hidden_size=288, num_attention_heads=9, intermediate_size=576
    )
    assert describe_shape(3, config.to_dict()) == "3 layers of 288 channels, 9 heads and 576 FFN neurons"


def test_one_layer_and_one_head_read_in_the_singular():
    width = {"hidden_size": 32, "num_attention_heads": 1, "intermediate_size": 64}
    assert describe_shape(1, width) == "1 layer of 32 channels, 1 head and 64 FFN neurons"


def test_a_mixture_of_experts_names_its_experts_and_their_width():
    from compact_bert.configuration.modular_minimoe import MiniMoEConfig

    config = MiniMoEConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_experts=4,
        moe_intermediate_size=32,
    )
    assert describe_width(config.to_dict()) == "64 channels, 4 heads and 4 experts of 32 FFN neurons"


def test_the_budgets_narrowed_shapes_are_described_like_configs():
    config = transformers.BertConfig(
        num_hidden_layers=3, hidden_size=384, num_attention_heads=12, intermediate_size=1536
    )
    assert [describe_width(width) for width in narrowed_shapes(config)] == [
        "320 channels, 10 heads and 640 FFN neurons",
        "320 channels, 10 heads and 448 FFN neurons",
        "288 channels, 9 heads and 576 FFN neurons",
        "256 channels, 8 heads and 768 FFN neurons",
    ]
