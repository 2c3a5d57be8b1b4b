"""The named paper-size presets of every family: preset name → (model type, config fields).

Keyed by model type, not by class, so that ``configuration/__init__`` builds them with the generated config classes
and the modular sources are never imported at run time (one config class per model type in a process).
"""

from __future__ import annotations

__all__ = ["PRESET_FIELDS", "minilm_fields_like"]


def minilm_fields_like(config, num_hidden_layers: int | None = None) -> dict:
    """The config fields of a dense BERT with a BERT-like ``config``'s shape and ``num_hidden_layers`` layers
    (default: half of ``config``'s, rounded up): the main job's layer-dropped baseline, and the dense teacher shape
    that the depth budget times students against."""
    return {
        "num_hidden_layers": num_hidden_layers or (config.num_hidden_layers + 1) // 2,
        "hidden_size": config.hidden_size,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "vocab_size": config.vocab_size,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "hidden_act": config.hidden_act,
    }


def _student(layers: int, hidden: int, experts: int | None = None) -> dict:
    # MiniLM students keep a 32-d attention head and a 4x FFN, as the public MiniLM checkpoints do. A dense one
    # (no ``experts``) is a plain BERT: configuration/dense_students.py.
    shape = {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": hidden // 32,
        "intermediate_size": 4 * hidden,
    }
    return shape if experts is None else {**shape, "num_experts": experts}


_MOE_BERT_SMALL = {"hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512}

PRESET_FIELDS: dict[str, tuple[str, dict]] = {
    # Paper 001: Table 1, Table 4 "w/o OPT", appendix E.
    "ib-bert-large": ("ib_bert", {}),
    "mobilebert": ("compact_mobilebert", {}),
    "mobilebert-tiny": ("compact_mobilebert", {"num_feedforward_networks": 2, "attention_input": "intra_bottleneck"}),
    "mobilebert-wo-opt": ("compact_mobilebert", {"normalization_type": "layer_norm", "hidden_act": "gelu"}),
}
# Paper 002 Table 3: the students with m = 4 experts, and each one's dense MiniLM (1,1E) counterpart — a plain BERT.
for _layers, _hidden in ((6, 384), (4, 384), (3, 384), (4, 192), (3, 96)):
    PRESET_FIELDS[f"minimoe-{_layers}l-{_hidden}h"] = ("minimoe", _student(_layers, _hidden, 4))
    PRESET_FIELDS[f"minilm-{_layers}l-{_hidden}h"] = ("bert", _student(_layers, _hidden))
# The default embedding student (`compact-bert distill embeddings`): 3 of all-MiniLM-L6-v2's 6 layers with the 1,024
# most important of each FFN's 1,536 neurons, which takes its latency from 0.50x to 0.41x the teacher's for 0.5 points
# of STS-B Spearman (docs/embeddings.md).
PRESET_FIELDS["minilm-3l-384h-ffn1024"] = ("bert", {**_student(3, 384), "intermediate_size": 1024})
# Paper 003 appendix A: H=128 (dense 6.3M / MoE 105M) and H=768 (dense 110M / MoE 3.6B), 12 layers each.
PRESET_FIELDS.update(
    {
        "moe-bert-small": ("moe_bert", dict(_MOE_BERT_SMALL)),
        "vanilla-bert-small": ("moe_bert", {**_MOE_BERT_SMALL, "num_experts": 1}),
        "moe-bert-base": ("moe_bert", {}),
        "vanilla-bert-base": ("moe_bert", {"num_experts": 1}),
    }
)
