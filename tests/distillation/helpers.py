"""Tiny teacher/student pairs and block datasets shared by the distillation tests."""

from __future__ import annotations

import functools

from compact_bert.configuration import CompactMobileBertConfig, IBBertConfig
from compact_bert.distillation.data import (
    build_block_dataset,
    bundled_corpus_files,
    default_tokenizer,
    load_text_corpus,
)

BLOCK_SIZE = 32
_BOTTLENECK = {
    "vocab_size": 30522,
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
}


def tiny_ib_bert_config() -> IBBertConfig:
    return IBBertConfig(**_BOTTLENECK, intra_bottleneck_size=64, intermediate_size=64)


def tiny_mobilebert_config(**overrides) -> CompactMobileBertConfig:
    fields = {**_BOTTLENECK, "intra_bottleneck_size": 16, "intermediate_size": 32, "num_feedforward_networks": 2}
    return CompactMobileBertConfig(**{**fields, **overrides})


@functools.cache
def tokenizer():
    return default_tokenizer()


@functools.cache
def held_out_blocks(with_pairs: bool, count: int = 96):
    """Blocks from the bundled held-out WikiText-2 slice (small and quick to tokenize)."""
    text = load_text_corpus([str(bundled_corpus_files("heldout")[0])])
    blocks = build_block_dataset(text.select(range(400)), tokenizer(), BLOCK_SIZE, with_pairs)
    return blocks.select(range(min(count, len(blocks))))
