"""Word replacement for the transfer set: the packaged teacher's word-embedding neighbours, and copies that use them
(``finetuning/word_neighbours.py``, ``finetuning/augmentation.py``)."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from compact_bert.distillation.teachers import resolve_model_path
from compact_bert.finetuning.augmentation import augment_sentences, augment_split, augment_tagged_words
from compact_bert.finetuning.word_neighbours import WordNeighbours

SENTENCE = "a man is playing a large guitar on the stage tonight"


@pytest.fixture(scope="module")
def teacher_neighbours() -> WordNeighbours:
    """Neighbours in the real pretrained teacher's word embeddings (all-MiniLM-L6-v2, packaged offline)."""
    path = resolve_model_path("all-MiniLM-L6-v2")
    return WordNeighbours.from_model(AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path), k=15)


def test_the_teachers_embeddings_give_words_of_the_same_kind(teacher_neighbours):
    assert {"excellent", "great"} <= set(teacher_neighbours.of("good"))
    assert {"four", "two"} <= set(teacher_neighbours.of("three"))
    assert "woman" in teacher_neighbours.of("man") and "man" not in teacher_neighbours.of("man")
    assert teacher_neighbours.of("Good") == teacher_neighbours.of("good")  # an uncased tokenizer
    for word in ("good", "three", "guitar", "said"):
        options = teacher_neighbours.of(word)
        assert len(options) == 15 and all(option.isalpha() for option in options)  # no ##pieces, [MASK], digits
    assert teacher_neighbours.of("xylophonists") == []  # not one vocabulary token: stays itself
    assert teacher_neighbours.of("[MASK]") == [] and teacher_neighbours.of("2019") == []


def test_a_replaced_word_keeps_its_punctuation_and_capital(teacher_neighbours):
    rng = random.Random(0)
    for _ in range(20):
        replaced = teacher_neighbours.replace('"Guitar,', rng)
        assert replaced.startswith('"') and replaced.endswith(",") and replaced[1].isupper()
        assert replaced[1:-1].lower() in teacher_neighbours.of("guitar")
    assert teacher_neighbours.replace("42.", rng) == "42." and teacher_neighbours.replace("...", rng) == "..."


def test_copies_replace_about_p_t_of_the_unmasked_words_with_neighbours(teacher_neighbours):
    rng = random.Random(1)
    words = SENTENCE.split()
    replaced = masked = total = 0
    for _ in range(300):
        copy = augment_sentences(SENTENCE, "[MASK]", rng, teacher_neighbours)
        if len(copy.split()) != len(words):  # an n-gram cut: positions no longer line up
            continue
        for source, word in zip(words, copy.split()):
            total += 1
            if word == "[MASK]":
                masked += 1
            elif word != source:
                assert word in teacher_neighbours.of(source)
                replaced += 1
    # p_mask = 0.1; each other word replaced with p_t = 0.4 (every word of this sentence has neighbours)
    assert 0.07 < masked / total < 0.13 and 0.32 < replaced / total < 0.40


def test_without_neighbours_the_same_seed_gives_the_copies_it_gave_before_word_replacement():
    rng = random.Random(3)
    assert [augment_sentences(SENTENCE, "[MASK]", rng) for _ in range(4)] == [
        "a man is playing a [MASK] [MASK] on the stage tonight",
        "a man is playing a large guitar on the [MASK] tonight",
        "a [MASK] is playing a large guitar on the stage tonight",
        "a [MASK] is playing a large guitar on the stage tonight",
    ]


def test_tagged_copies_with_replacement_keep_each_tag_at_its_place(teacher_neighbours):
    words, tags = ["Alice", "visited", "Paris", "on", "Monday"], [1, 0, 5, 0, 0]
    rng = random.Random(2)
    changed = 0
    for _ in range(200):
        copy, copy_tags = augment_tagged_words(words, tags, "[MASK]", rng, teacher_neighbours)
        assert len(copy) == len(copy_tags)
        if len(copy) == len(words):
            assert copy_tags == tags
            changed += sum(word not in (source, "[MASK]") for word, source in zip(copy, words))
    assert changed > 0


def test_a_split_of_pairs_grows_with_replaced_words_reproducibly(teacher_neighbours):
    import datasets

    split = datasets.Dataset.from_dict(
        {"sentence1": ["a man is playing a guitar"], "sentence2": ["a woman plays the violin"], "label": [2.4]}
    )
    columns = ("sentence1", "sentence2")
    grown = augment_split(split, columns, 8, "[MASK]", seed=0, pair_perturbation="one", neighbours=teacher_neighbours)
    again = augment_split(split, columns, 8, "[MASK]", seed=0, pair_perturbation="one", neighbours=teacher_neighbours)
    assert grown["sentence1"] == again["sentence1"] and grown["sentence2"] == again["sentence2"]
    for first, second in zip(grown["sentence1"][1:], grown["sentence2"][1:]):
        assert first == split[0]["sentence1"] or second == split[0]["sentence2"]  # one sentence kept whole
    vocabulary = {word for sentence in (*grown["sentence1"], *grown["sentence2"]) for word in sentence.split()}
    assert vocabulary - set(" ".join([*split["sentence1"], *split["sentence2"], "[MASK]"]).split())  # new words


def test_neighbours_need_the_embeddings_of_the_tokenizers_ids():
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("all-MiniLM-L6-v2"))
    with pytest.raises(ValueError, match="1000 rows for a tokenizer of 30522 tokens"):
        WordNeighbours(torch.zeros(1000, 8), tokenizer)
    with pytest.raises(ValueError, match="must be >= 1"):
        WordNeighbours(torch.zeros(len(tokenizer), 8), tokenizer, k=0)
