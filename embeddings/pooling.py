"""Pooling token embeddings into one sentence embedding, as sentence-transformers' ``Pooling`` and ``Normalize`` do.

Mean pooling averages the real tokens' last hidden states (padding excluded); ``mean_sqrt_len`` divides the sum by
the square root of the token count instead; ``cls`` takes the first token; ``max`` the element-wise maximum over
real tokens. An optional projection (sentence-transformers' ``Dense`` with the identity activation) maps a narrow
student's embedding to its teacher's size, and the embedding is then L2-normalised where the teacher normalises.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers.utils import ModelOutput

__all__ = ["POOLING_MODES", "SentenceEmbedder", "SentenceEmbeddingOutput", "pool_tokens"]

POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len")


def pool_tokens(token_embeddings: torch.Tensor, attention_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """``[batch, seq, width]`` token embeddings → ``[batch, width]`` sentence embeddings, padding excluded."""
    if mode not in POOLING_MODES:
        raise ValueError(f"Unknown pooling mode {mode!r}; valid: {', '.join(POOLING_MODES)}.")
    if mode == "cls":
        return token_embeddings[:, 0]
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    if mode == "max":
        return token_embeddings.masked_fill(mask == 0, torch.finfo(token_embeddings.dtype).min).amax(dim=1)
    summed = (token_embeddings * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-9)
    return summed / (counts.sqrt() if mode == "mean_sqrt_len" else counts)


@dataclass
class SentenceEmbeddingOutput(ModelOutput):
    """``sentence_embedding``: ``[batch, dimension]``; ``encoder_outputs``: the encoder's own output (an MoE
    student's balance loss and routing statistics are read from it)."""

    sentence_embedding: torch.Tensor | None = None
    encoder_outputs: ModelOutput | None = None


class SentenceEmbedder(nn.Module):
    """A transformers encoder followed by pooling, an optional linear projection and optional normalisation.

    The encoder stays a ``PreTrainedModel`` (saved with ``save_pretrained``, loaded with ``AutoModel``); the
    projection is a plain ``nn.Linear`` saved as sentence-transformers' ``Dense`` module.
    """

    def __init__(
        self,
        encoder: nn.Module,
        pooling: str = "mean",
        projection: nn.Linear | None = None,
        normalize: bool = True,
        max_seq_length: int = 256,
    ):
        super().__init__()
        if pooling not in POOLING_MODES:
            raise ValueError(f"Unknown pooling mode {pooling!r}; valid: {', '.join(POOLING_MODES)}.")
        if projection is not None and projection.in_features != encoder.config.hidden_size:
            raise ValueError(
                f"The projection takes {projection.in_features} features but the encoder's hidden_size is "
                f"{encoder.config.hidden_size}."
            )
        self.encoder = encoder
        self.pooling = pooling
        self.projection = projection
        self.normalize = normalize
        self.max_seq_length = max_seq_length

    @property
    def config(self):
        """The encoder's config: what the trainers and the checkpoint checks read."""
        return self.encoder.config

    @property
    def embedding_dimension(self) -> int:
        return self.projection.out_features if self.projection is not None else self.encoder.config.hidden_size

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> SentenceEmbeddingOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        outputs = self.encoder(**inputs, **kwargs)
        embedding = pool_tokens(outputs.last_hidden_state, attention_mask, self.pooling)
        if self.projection is not None:
            embedding = self.projection(embedding)
        if self.normalize:
            embedding = F.normalize(embedding, p=2, dim=1)
        return SentenceEmbeddingOutput(sentence_embedding=embedding, encoder_outputs=outputs)

    @torch.no_grad()
    def encode(self, sentences: list[str], tokenizer, batch_size: int = 64) -> torch.Tensor:
        """Embeddings of ``sentences`` in order (``[len, dimension]``, float32, CPU), in evaluation mode, truncated at
        ``max_seq_length`` tokens as sentence-transformers truncates."""
        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        chunks = []
        try:
            for start in range(0, len(sentences), batch_size):
                batch = tokenizer(
                    sentences[start : start + batch_size],
                    padding=True,
                    truncation=True,
                    max_length=self.max_seq_length,
                    return_tensors="pt",
                )
                batch = {
                    name: tensor.to(device)
                    for name, tensor in batch.items()
                    if name in ("input_ids", "attention_mask", "token_type_ids")
                }
                chunks.append(self(**batch).sentence_embedding.float().cpu())
        finally:
            self.train(was_training)
        if not chunks:
            return torch.empty(0, self.embedding_dimension)
        return torch.cat(chunks)
