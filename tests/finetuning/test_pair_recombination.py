"""Recombined sentence pairs: lexical neighbours as scikit-learn's TF-IDF ranks them, and new pairs that are whole
training sentences, never a pair the training set already holds."""

from __future__ import annotations

import datasets
import numpy
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from compact_bert.finetuning.augmentation import AUGMENTED_COLUMN, augment_split
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.pair_recombination import lexical_neighbours, recombine_pairs

PAIRS = [
    ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
    ("A woman is slicing an onion.", "A woman cuts an onion.", 4.2),
    ("A man is playing a flute.", "Someone plays a wooden flute.", 3.6),
    ("The cat sleeps on the sofa.", "A dog runs in the park.", 0.2),
    ("A woman is slicing a tomato.", "The chef cuts tomatoes.", 3.1),
    ("Stocks fell sharply on Monday.", "Markets dropped on Monday.", 4.0),
    ("Zebras graze quietly.", "Quietly, zebras graze.", 5.0),
]


def _pairs(rows=PAIRS) -> datasets.Dataset:
    return datasets.Dataset.from_dict(
        {"sentence1": [a for a, _, _ in rows], "sentence2": [b for _, b, _ in rows], "label": [s for _, _, s in rows]}
    )


def test_neighbours_rank_as_scikit_learns_tfidf_cosine_does():
    """The bundled SST-2 sentences (real text, repeats and all): every anchor's neighbours, in order, are those of
    scikit-learn's TfidfVectorizer with the same words and smoothed IDF, ties to the lower index."""
    lines = bundled_sst2_files()["train"].read_text(encoding="utf-8").splitlines()[1:401]
    sentences = [line.split("\t")[0] for line in lines]
    anchors = list(range(0, 400, 7))
    found = lexical_neighbours(sentences, anchors, 5)
    matrix = TfidfVectorizer(token_pattern=r"[a-z0-9]+").fit_transform(sentences)
    cosine = (matrix @ matrix.T).toarray()
    for anchor, ranked in zip(anchors, found):
        scores = cosine[:, anchor].copy()
        scores[anchor] = 0
        order = [index for index in numpy.lexsort((numpy.arange(len(scores)), -scores)) if scores[index] > 0][:5]
        assert [index for index, _ in ranked] == order[: len(ranked)] and len(ranked) == len(order)
        assert [score for _, score in ranked] == pytest.approx([scores[index] for index in order], abs=1e-5)


def test_recombined_pairs_pair_each_first_sentence_with_other_training_sentences_and_keep_the_originals():
    split = _pairs()
    out = recombine_pairs(split, ("sentence1", "sentence2"), 2)
    assert out.select(range(len(split))).to_dict() == {**split.to_dict(), AUGMENTED_COLUMN: [False] * len(split)}
    new = out.select(range(len(split), len(out)))
    assert all(new[AUGMENTED_COLUMN]) and 0 < len(new) <= 2 * len(split)
    training = {a for a, _, _ in PAIRS} | {b for _, b, _ in PAIRS}
    existing = {(a, b) for a, b, _ in PAIRS} | {(b, a) for a, b, _ in PAIRS}
    drawn = list(zip(new["sentence1"], new["sentence2"]))
    assert len(set(drawn)) == len(drawn)  # never the same new pair twice
    for (first, second), label in zip(drawn, new["label"]):
        source = next(row for row in PAIRS if row[0] == first)
        assert second in training and second != first and (first, second) not in existing
        assert label == source[2]  # the source's label, until the teacher relabels the pair
    # the guitar player's nearest other sentences share "playing", "man", "a"...: the flute player comes first
    assert ("A man is playing a guitar.", "A man is playing a flute.") in drawn
    # the zebras share no word with any other pair: no partner is made up for them
    assert "Zebras graze quietly." not in new["sentence1"]
    assert recombine_pairs(split, ("sentence1", "sentence2"), 2).to_dict() == out.to_dict()  # no seed, no drift


def test_only_original_pairs_are_recombined_after_the_perturbed_copies():
    copies = augment_split(_pairs(), ("sentence1", "sentence2"), 2, "[MASK]", seed=0, pair_perturbation="one")
    out = recombine_pairs(copies, ("sentence1", "sentence2"), 1)
    new = out.select(range(len(copies), len(out)))
    originals = {a for a, _, _ in PAIRS} | {b for _, b, _ in PAIRS}
    assert set(new["sentence1"]) <= originals and set(new["sentence2"]) <= originals  # never a perturbed copy
    assert len(new) <= len(PAIRS) and out.select(range(len(copies))).to_dict() == copies.to_dict()


def test_recombination_refuses_one_column_tasks_and_negative_counts_and_adds_nothing_at_zero():
    with pytest.raises(ValueError, match=r"sentence-pair task \(two text columns\), got \('sentence',\)"):
        recombine_pairs(datasets.Dataset.from_dict({"sentence": ["a b"], "label": [1]}), ("sentence",), 1)
    with pytest.raises(ValueError, match="per_pair must be >= 0, got -1"):
        recombine_pairs(_pairs(), ("sentence1", "sentence2"), -1)
    assert recombine_pairs(_pairs(), ("sentence1", "sentence2"), 0)[AUGMENTED_COLUMN] == [False] * len(PAIRS)
