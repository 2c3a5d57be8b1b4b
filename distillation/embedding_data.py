"""Data of embedding distillation: tokenized sentences, the teacher's embeddings of them (cached), batches.

The teacher's embedding of every sentence is computed once and stored in the offline teacher-output cache
(``teacher_cache``), keyed by the teacher's weights and embedding head, the tokenizer, the tokenized sentences and
the maximum length: seeds, students and grids over the same corpus reuse it, and a change to any input rebuilds it.
"""

from __future__ import annotations

import hashlib
import json

import torch
from transformers import DataCollatorWithPadding

from .teacher_cache import (
    CacheResult,
    cached_teacher_outputs,
    data_fingerprint,
    teacher_fingerprint,
    tokenizer_fingerprint,
)

__all__ = ["EmbeddingDistillationCollator", "teacher_sentence_embeddings", "tokenize_sentences"]

_MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def tokenize_sentences(sentences: list[str], tokenizer, max_length: int):
    """A ``datasets.Dataset`` of the tokenized sentences (cut at ``max_length``) with each one's ``sentence_index``."""
    from datasets import Dataset

    encoded = tokenizer(sentences, truncation=True, max_length=max_length)
    columns = {name: encoded[name] for name in _MODEL_INPUTS if name in encoded}
    columns["sentence_index"] = list(range(len(sentences)))
    return Dataset.from_dict(columns)


def _head_fingerprint(embedder) -> str:
    settings = {"pooling": embedder.pooling, "normalize": embedder.normalize}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    if embedder.projection is not None:
        for tensor in embedder.projection.state_dict().values():
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def teacher_sentence_embeddings(
    teacher, tokenizer, dataset, max_length: int, cache_dir=None, batch_size: int = 128
) -> CacheResult:
    """``outputs["sentence_embedding"]``: ``[len(dataset), dimension]``, the teacher ``SentenceEmbedder``'s
    embedding of each tokenized sentence, in dataset order, from the cache or computed and stored."""
    collator = DataCollatorWithPadding(tokenizer)

    def compute() -> dict[str, torch.Tensor]:
        was_training = teacher.training
        teacher.eval()
        chunks = []
        with torch.no_grad():
            for start in range(0, len(dataset), batch_size):
                rows = dataset[start : start + batch_size]
                features = [
                    {name: rows[name][i] for name in _MODEL_INPUTS if name in rows}
                    for i in range(len(rows["input_ids"]))
                ]
                chunks.append(teacher(**collator(features)).sentence_embedding.float())
        teacher.train(was_training)
        return {"sentence_embedding": torch.cat(chunks)}

    fingerprints = {
        "kind": "sentence_embedding",
        "teacher": teacher_fingerprint(teacher.encoder),
        "embedding_head": _head_fingerprint(teacher),
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "data": data_fingerprint(dataset),
        "max_length": max_length,
    }
    return cached_teacher_outputs(compute, fingerprints, cache_dir)


class EmbeddingDistillationCollator:
    """Pads the sentences of a batch and adds each one's teacher embedding (``teacher_embedding``)."""

    def __init__(self, tokenizer, teacher_embeddings: torch.Tensor):
        self.padding = DataCollatorWithPadding(tokenizer)
        self.teacher_embeddings = teacher_embeddings

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        batch = self.padding(
            [{name: example[name] for name in _MODEL_INPUTS if name in example} for example in examples]
        )
        indices = torch.tensor([example["sentence_index"] for example in examples])
        batch["teacher_embedding"] = self.teacher_embeddings[indices]
        return dict(batch)
