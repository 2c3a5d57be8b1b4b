"""Sentence embeddings: an encoder with the pooling, projection and normalisation of a sentence-transformers model.

``SentenceEmbedder`` computes what ``SentenceTransformer.encode`` computes (``pooling``), and reads and writes the
module files of a sentence-transformers folder without importing sentence-transformers
(``sentence_transformers_folder``), so that the transformers 4.57 line, where sentence-transformers 6 cannot be
installed, saves the same folders. ``sentences`` reads the unlabelled sentences embedding distillation learns from.
"""

from .pooling import POOLING_MODES, SentenceEmbedder, SentenceEmbeddingOutput, pool_tokens
from .sentence_transformers_folder import (
    EmbeddingHead,
    SentenceFolderError,
    load_sentence_embedder,
    read_embedding_head,
    save_sentence_embedder,
)

__all__ = [
    "EmbeddingHead",
    "POOLING_MODES",
    "SentenceEmbedder",
    "SentenceEmbeddingOutput",
    "SentenceFolderError",
    "load_sentence_embedder",
    "pool_tokens",
    "read_embedding_head",
    "save_sentence_embedder",
]
