"""Tiny sentence-embedding students over the real bert-base-uncased vocabulary (the packaged teacher's tokenizer)."""

from __future__ import annotations

import torch
import transformers
from torch import nn

from compact_bert.configuration import MiniMoEConfig
from compact_bert.embeddings import SentenceEmbedder

SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays an instrument on a small stage while the audience listens quietly.",
    "The stock market fell sharply on Monday.",
    "Hi!",
    "Two dogs run through the snow, chasing a red ball that bounces away from them.",
]


def tiny_student(num_experts: int = 4, hidden_size: int = 32, seed: int = 0) -> transformers.PreTrainedModel:
    torch.manual_seed(seed)
    config = MiniMoEConfig(
        vocab_size=30522,
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        num_experts=num_experts,
        max_position_embeddings=128,
    )
    return transformers.AutoModel.from_config(config).eval()


def tiny_embedder(projection_to: int | None = 48, pooling: str = "mean", num_experts: int = 4) -> SentenceEmbedder:
    encoder = tiny_student(num_experts)
    projection = nn.Linear(encoder.config.hidden_size, projection_to) if projection_to else None
    return SentenceEmbedder(encoder, pooling, projection, normalize=True, max_seq_length=64).eval()
