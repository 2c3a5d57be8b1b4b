"""Transfer-set augmentation for task distillation: more inputs for the teacher to label.

A teacher fine-tuned on a few thousand sentences knows more than their labels say; it can say it only about inputs
the student is shown. Tang et al. (2019, "Distilling Task-Specific Knowledge from BERT into Simple Neural
Networks", §3.2) grow the transfer set with rule-based perturbations of the training sentences and label every
new sentence with the teacher's prediction; TinyBERT (§3.1, data augmentation) does the same with a masked LM.
We implement the two rules of Tang et al. that need no other model, per word:

- **masking**: each word becomes the tokenizer's mask token with probability ``p_mask`` (0.1);
- **n-gram sampling**: with probability ``p_ng`` (0.25) the sentence is cut to a random n-gram, ``n`` uniform in
  1..5 (paper's range).

Their third rule, part-of-speech-guided word replacement, needs a tagger; TinyBERT's word replacement takes its
place when ``neighbours`` are given (``word_neighbours.py``): a word that is not masked is replaced with
probability ``p_t`` (0.4) by one of its nearest neighbours in the teacher's word embeddings. Sentence pairs
are perturbed sentence by sentence. Tagged sentences (NER) are perturbed word by word with their tags: a masked word
keeps its place and tag, an n-gram keeps its words' tags; the teacher then relabels every word of the copy. The
augmentation depends only on its own seed, not on the run's, so every seed of a grid trains on the same transfer
set and reuses the teacher's cached logits.
"""

from __future__ import annotations

import random

import datasets

from .word_neighbours import REPLACE_PROBABILITY, WordNeighbours

__all__ = [
    "AUGMENTED_COLUMN",
    "PAIR_PERTURBATIONS",
    "append_unlabeled",
    "augment_sentences",
    "augment_split",
    "augment_tagged_words",
]

AUGMENTED_COLUMN = "augmented"
MASK_PROBABILITY = 0.1
NGRAM_PROBABILITY = 0.25
MAX_NGRAM = 5
PAIR_PERTURBATIONS = ("both", "one")


def _perturb_word(word: str, mask_token: str, rng: random.Random, neighbours: WordNeighbours | None) -> str:
    """Masked with probability ``p_mask``; else, with ``neighbours``, replaced with probability ``p_t``. Without
    ``neighbours`` one draw per word, as before word replacement existed: the same seed, the same copies."""
    if rng.random() < MASK_PROBABILITY:
        return mask_token
    if neighbours is not None and rng.random() < REPLACE_PROBABILITY:
        return neighbours.replace(word, rng)
    return word


def augment_sentences(text: str, mask_token: str, rng: random.Random, neighbours: WordNeighbours | None = None) -> str:
    """One perturbed copy of ``text`` (module docstring); never empty for a non-empty input."""
    words = text.split()
    if not words:
        return text
    words = [_perturb_word(word, mask_token, rng, neighbours) for word in words]
    if rng.random() < NGRAM_PROBABILITY:
        length = rng.randint(1, min(MAX_NGRAM, len(words)))
        start = rng.randint(0, len(words) - length)
        words = words[start : start + length]
    return " ".join(words)


def augment_tagged_words(
    words: list[str], tags: list, mask_token: str, rng: random.Random, neighbours: WordNeighbours | None = None
) -> tuple[list, list]:
    """One perturbed copy of a tagged sentence (``augment_sentences``'s rules, word by word; a replaced word keeps
    its tag until the teacher relabels it): the words and the tags that stay aligned with them."""
    if not words:
        return list(words), list(tags)
    words = [_perturb_word(word, mask_token, rng, neighbours) for word in words]
    tags = list(tags)
    if rng.random() < NGRAM_PROBABILITY:
        length = rng.randint(1, min(MAX_NGRAM, len(words)))
        start = rng.randint(0, len(words) - length)
        words, tags = words[start : start + length], tags[start : start + length]
    return words, tags


def augment_split(
    split: datasets.Dataset,
    text_columns: tuple[str, ...],
    copies: int,
    mask_token: str,
    seed: int,
    tag_column: str | None = None,
    pair_perturbation: str = "both",
    neighbours: WordNeighbours | None = None,
    pair_swap: bool = False,
) -> datasets.Dataset:
    """``split`` followed by ``copies`` perturbed copies of every example (original order, copy after copy), with a
    boolean ``augmented`` column; the copies keep their source's label until the teacher relabels them. With
    ``tag_column`` (NER: one text column of words, one column of their tags), words and tags are perturbed
    together (``augment_tagged_words``). Sentence pairs: ``pair_perturbation="both"`` perturbs each sentence of
    the copy; ``"one"`` perturbs one of the two, drawn at random, and keeps its partner whole, so that the copy
    still asks how two real-looking sentences relate. ``pair_swap``: each copy of a pair also trades its two
    sentences' places with probability 1/2 — a cross-encoder reads the pair in one order, and the teacher's label
    of the other order is a new input at no labelling cost (sentence-transformers trains its STS-B cross-encoder on
    both orders). ``neighbours``: word replacement (module docstring)."""
    if pair_perturbation not in PAIR_PERTURBATIONS:
        raise ValueError(f"pair_perturbation must be one of {PAIR_PERTURBATIONS}, got {pair_perturbation!r}.")
    if copies < 1:
        return split.add_column(AUGMENTED_COLUMN, [False] * len(split))
    rng = random.Random(seed)
    columns = {name: list(split[name]) for name in split.column_names}
    added = {name: [] for name in split.column_names}
    for _ in range(copies):
        for index in range(len(split)):
            if tag_column is not None:
                (word_column,) = text_columns
                words, tags = augment_tagged_words(
                    columns[word_column][index], columns[tag_column][index], mask_token, rng, neighbours
                )
                for name in split.column_names:
                    added[name].append(
                        words if name == word_column else tags if name == tag_column else columns[name][index]
                    )
                continue
            perturbed = text_columns
            if pair_perturbation == "one" and len(text_columns) == 2:
                perturbed = (text_columns[rng.random() < 0.5],)
            copy = {}
            for name in split.column_names:
                value = columns[name][index]
                perturb = name in perturbed and value is not None
                copy[name] = augment_sentences(str(value), mask_token, rng, neighbours) if perturb else value
            if pair_swap and len(text_columns) == 2 and rng.random() < 0.5:
                first, second = text_columns
                copy[first], copy[second] = copy[second], copy[first]
            for name in split.column_names:
                added[name].append(copy[name])
    merged = {name: columns[name] + added[name] for name in split.column_names}
    merged[AUGMENTED_COLUMN] = [False] * len(split) + [True] * (copies * len(split))
    return datasets.Dataset.from_dict(
        merged, features=datasets.Features({**split.features, AUGMENTED_COLUMN: datasets.Value("bool")})
    )


def append_unlabeled(split: datasets.Dataset, unlabeled: datasets.Dataset) -> datasets.Dataset:
    """``split`` followed by ``unlabeled`` in-domain examples, marked ``augmented`` like the perturbed copies, so that
    the teacher labels them: real text the teacher never saw is the transfer set of Hinton et al. (2015) and of
    Tang et al. (2019, §3.2), which adds its perturbed copies only where such text is short."""
    if AUGMENTED_COLUMN not in split.column_names:
        split = split.add_column(AUGMENTED_COLUMN, [False] * len(split))
    marked = unlabeled.add_column(AUGMENTED_COLUMN, [True] * len(unlabeled)).cast(split.features)
    return datasets.concatenate_datasets([split, marked])
