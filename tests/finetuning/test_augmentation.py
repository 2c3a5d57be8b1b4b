"""Transfer-set augmentation: perturbed copies of sentences, sentence pairs and tagged sentences, and the teacher's
labels for them."""

from __future__ import annotations

import random

import datasets
import pytest

from compact_bert.finetuning.augmentation import (
    AUGMENTED_COLUMN,
    augment_sentences,
    augment_split,
    augment_tagged_words,
)
from compact_bert.finetuning.task_distillation import TEACHER_LOGITS, label_augmented_examples

WORDS = ["Peter", "Blackburn", "of", "the", "European", "Commission", "said", "on", "Thursday", "in", "Brussels"]
TAGS = [7, 8, 0, 0, 5, 6, 0, 0, 0, 0, 1]


def _aligned(source_words, source_tags, words, tags) -> bool:
    """``words`` / ``tags`` are a contiguous run of the source, each word the source's or the mask token, each tag
    the source's tag at that position."""
    for start in range(len(source_words) - len(words) + 1):
        if all(
            word in (source_words[start + offset], "[MASK]") and tag == source_tags[start + offset]
            for offset, (word, tag) in enumerate(zip(words, tags))
        ):
            return True
    return False


def test_tagged_copies_keep_every_tag_with_its_word():
    rng = random.Random(0)
    masked = cut = 0
    for _ in range(300):
        words, tags = augment_tagged_words(WORDS, TAGS, "[MASK]", rng)
        assert len(words) == len(tags) >= 1
        assert _aligned(WORDS, TAGS, words, tags)
        masked += words.count("[MASK]")
        cut += len(words) < len(WORDS)
    # both rules fire at about their rates: p_mask 0.1 per word, p_ng 0.25 per sentence
    assert 0.06 < masked / (300 * len(WORDS)) < 0.14 and 0.15 < cut / 300 < 0.35
    assert augment_tagged_words([], [], "[MASK]", rng) == ([], [])


def test_sentence_copies_are_reproducible_and_never_empty():
    first = [augment_sentences(" ".join(WORDS), "[MASK]", random.Random(3)) for _ in range(5)]
    second = [augment_sentences(" ".join(WORDS), "[MASK]", random.Random(3)) for _ in range(5)]
    assert first == second and all(text.strip() for text in first)


def test_a_tagged_split_grows_by_its_copies_with_words_and_tags_aligned():
    split = datasets.Dataset.from_dict({"tokens": [WORDS, WORDS[:4]], "label": [TAGS, TAGS[:4]]})
    grown = augment_split(split, ("tokens",), 2, "[MASK]", seed=1, tag_column="label")
    assert len(grown) == 6 and grown[AUGMENTED_COLUMN] == [False, False, True, True, True, True]
    assert grown[0]["tokens"] == WORDS and grown[1]["label"] == TAGS[:4]  # the originals first, unchanged
    for index in range(2, 6):
        source = index % 2
        source_words, source_tags = split[source]["tokens"], split[source]["label"]
        assert _aligned(source_words, source_tags, grown[index]["tokens"], grown[index]["label"])
    again = augment_split(split, ("tokens",), 2, "[MASK]", seed=1, tag_column="label")
    assert again["tokens"] == grown["tokens"]  # the copies depend on the augmentation seed only


def test_the_teacher_relabels_the_words_of_tagged_copies_and_leaves_the_originals_alone():
    # two examples of 4 token positions, 3 classes; -100 marks special tokens and later sub-tokens
    logits = [
        [[0, 0, 0], [0, 5, 0], [0, 0, 5], [9, 0, 0]],
        [[0, 0, 0], [0, 5, 0], [0, 0, 5], [9, 0, 0]],
    ]
    split = datasets.Dataset.from_dict({"labels": [[-100, 0, 0, -100], [-100, 0, 0, -100]], TEACHER_LOGITS: logits})
    relabelled = label_augmented_examples(split, [False, True], "ner")
    assert relabelled[0]["labels"] == [-100, 0, 0, -100]
    assert relabelled[1]["labels"] == [-100, 1, 2, -100]


def test_pair_copies_perturb_one_sentence_and_keep_its_partner_whole_when_asked():
    first = [" ".join(WORDS), "A man is playing a large flute on a stage tonight"] * 100
    second = ["The European Commission said on Thursday it disagreed", "A man plays the flute on a stage"] * 100
    split = datasets.Dataset.from_dict({"sentence1": first, "sentence2": second, "label": [3.5] * 200})
    one = augment_split(split, ("sentence1", "sentence2"), 1, "[MASK]", seed=0, pair_perturbation="one")
    both = augment_split(split, ("sentence1", "sentence2"), 1, "[MASK]", seed=0, pair_perturbation="both")
    kept_one = [
        (row["sentence1"] == first[index], row["sentence2"] == second[index])
        for index, row in enumerate(one.select(range(200, 400)))
    ]
    kept_both = [
        (row["sentence1"] == first[index], row["sentence2"] == second[index])
        for index, row in enumerate(both.select(range(200, 400)))
    ]
    assert all(any(pair) for pair in kept_one)  # a partner always stays whole
    assert sum(not first_kept for first_kept, _ in kept_one) > 20 and sum(not kept for _, kept in kept_one) > 20
    assert sum(not any(pair) for pair in kept_both) > 20  # both perturbed in the same copy
    with pytest.raises(ValueError, match="pair_perturbation must be one of"):
        augment_split(split, ("sentence1", "sentence2"), 1, "[MASK]", seed=0, pair_perturbation="either")


def test_swapped_pair_copies_trade_places_half_the_time_and_leave_the_copies_unchanged_when_off():
    first = [" ".join(WORDS), "A man is playing a large flute on a stage tonight"] * 100
    second = ["The European Commission said on Thursday it disagreed", "A man plays the flute on a stage"] * 100
    split = datasets.Dataset.from_dict({"sentence1": first, "sentence2": second, "label": [3.5] * 200})
    pair = ("sentence1", "sentence2")
    swapped = augment_split(split, pair, 2, "[MASK]", seed=0, pair_perturbation="one", pair_swap=True)
    copies = swapped.select(range(200, 600))
    # a copy keeps one sentence whole: whole in the other place means the pair was swapped
    swaps = [
        row["sentence2"] == first[index % 200] or row["sentence1"] == second[index % 200]
        for index, row in enumerate(copies)
    ]
    assert 150 < sum(swaps) < 250
    assert swapped.select(range(200))[:] == {**split[:], AUGMENTED_COLUMN: [False] * 200}  # originals untouched
    off = augment_split(split, pair, 2, "[MASK]", seed=0, pair_perturbation="one")
    assert off[:] == augment_split(split, pair, 2, "[MASK]", seed=0, pair_perturbation="one", pair_swap=False)[:]
    assert not any(row["sentence2"] == first[index % 200] for index, row in enumerate(off.select(range(200, 600))))
    single = datasets.Dataset.from_dict({"sentence": first, "label": [1] * 200})
    assert (
        augment_split(single, ("sentence",), 1, "[MASK]", seed=0, pair_swap=True)[:]
        == augment_split(single, ("sentence",), 1, "[MASK]", seed=0)[:]
    )
