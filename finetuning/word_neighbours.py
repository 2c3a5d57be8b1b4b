"""Word replacement for the transfer set: each word's nearest neighbours in the teacher's word-embedding space.

Masking and n-gram sampling (``augmentation.py``) make copies that mostly *look like* their source: a few
``[MASK]`` tokens, or a short cut. TinyBERT's augmentation (Jiao et al., 2020, §3.1, Algorithm 1) replaces words
with similar ones instead — a masked LM's guesses for single-piece words, GloVe's nearest neighbours for the rest,
each word with probability ``p_t = 0.4``, ``K = 15`` candidates. The copies then ask the teacher new questions ("a
woman is playing a violin" beside "a man is playing a guitar"), whose answers are what the student lacks on inputs
it was never shown.

No masked LM or GloVe ships with a sentence-embedding teacher, but its input word embeddings are a trained word
space of the same kind: the cosine neighbours of ``good`` are ``excellent``, ``bad``, ``great``; of ``three``,
``four``, ``two``, ``five``. So every word that is one whole vocabulary token gets its ``K`` nearest whole-word
tokens (letters only: no sub-word pieces, special tokens, digits or punctuation) as candidates; other words keep
their place. The candidates are computed once per distinct word, on the teacher's own embeddings, and the choice
among them depends only on the augmentation's random generator.
"""

from __future__ import annotations

import random
import re

import torch

__all__ = ["NEIGHBOURS", "REPLACE_PROBABILITY", "WordNeighbours"]

# TinyBERT's K (candidates per word) and p_t (probability that a word is replaced).
NEIGHBOURS = 15
REPLACE_PROBABILITY = 0.4
# A word as ``str.split`` leaves it: punctuation around letters ("guitar." -> "", "guitar", ".").
_WORD = re.compile(r"^(\W*)([^\W\d_]+)(\W*)$")


class WordNeighbours:
    """The ``k`` nearest whole-word vocabulary tokens of a word, by the cosine of ``embeddings``' rows."""

    def __init__(self, embeddings: torch.Tensor, tokenizer, k: int = NEIGHBOURS):
        if k < 1:
            raise ValueError(f"k (neighbours per word) must be >= 1, got {k}.")
        vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        if embeddings.shape[0] < len(vocabulary):
            raise ValueError(
                f"The word embeddings have {embeddings.shape[0]} rows for a tokenizer of {len(vocabulary)} tokens: "
                "the neighbours must come from the model that reads this tokenizer's ids."
            )
        self.tokenizer, self.k = tokenizer, k
        special = set(tokenizer.all_special_tokens)
        self.candidates = torch.tensor(
            [token.isalpha() and token not in special for token in vocabulary], dtype=torch.bool
        )
        self.vocabulary = vocabulary
        self.embeddings = torch.nn.functional.normalize(embeddings.detach().float()[: len(vocabulary)], dim=-1)
        self.lowercase = (
            tokenizer("A", add_special_tokens=False)["input_ids"]
            == tokenizer("a", add_special_tokens=False)["input_ids"]
        )
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def from_model(cls, model, tokenizer, k: int = NEIGHBOURS) -> WordNeighbours:
        """Neighbours in ``model``'s input word embeddings (the teacher's, so they are the words it reads alike)."""
        return cls(model.get_input_embeddings().weight, tokenizer, k)

    def of(self, word: str) -> list[str]:
        """``word``'s neighbours (lowercase for an uncased tokenizer), nearest first; [] when it is not one token."""
        key = word.lower() if self.lowercase else word
        if key not in self._cache:
            token_id = self.tokenizer.convert_tokens_to_ids(key)
            if token_id is None or token_id == self.tokenizer.unk_token_id or not self.candidates[token_id]:
                self._cache[key] = []
            else:
                similarity = self.embeddings @ self.embeddings[token_id]
                similarity[~self.candidates] = -2.0
                similarity[token_id] = -2.0
                self._cache[key] = [self.vocabulary[index] for index in similarity.topk(self.k).indices.tolist()]
        return self._cache[key]

    def replace(self, word: str, rng: random.Random) -> str:
        """``word`` with its letters replaced by one of their neighbours, drawn uniformly, its surrounding
        punctuation and a leading capital kept; ``word`` itself when it has no neighbours."""
        match = _WORD.match(word)
        if not match:
            return word
        before, core, after = match.groups()
        options = self.of(core)
        if not options:
            return word
        choice = rng.choice(options)
        if core[0].isupper() and self.lowercase:
            choice = choice[0].upper() + choice[1:]
        return before + choice + after
