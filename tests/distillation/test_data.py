"""Corpus pipeline on the real WikiText-2 files, collation, and every bad input failing early and clearly."""

from __future__ import annotations

import gzip

import datasets
import pytest
import torch

from compact_bert.configuration import MiniMoEConfig
from compact_bert.distillation.data import (
    CorpusArguments,
    PretrainingCollator,
    build_block_dataset,
    bundled_corpus_files,
    check_model_compatibility,
    default_tokenizer,
    load_text_corpus,
    resolve_text_files,
)
from compact_bert.distillation.trainer_utils import prepare_block_datasets
from compact_bert.training.run_errors import RunSettingsError
from tests.conftest import shared_data


@pytest.fixture(scope="module")
def tokenizer():
    return default_tokenizer()


def test_real_wikitext_files_become_full_blocks(tokenizer):
    text = load_text_corpus([str(shared_data("wikitext2", "valid.txt"))])
    assert len(text) > 2000 and all(row["text"].strip() for row in text.select(range(50)))
    blocks = build_block_dataset(text, tokenizer, block_size=64, with_pairs=False)
    assert len(blocks) > 1000
    assert {len(row["input_ids"]) for row in blocks.select(range(100))} == {62}
    decoded = tokenizer.decode(blocks[0]["input_ids"])
    assert "homarus" in decoded  # the first article of the validation split


def test_bundled_slice_matches_the_shared_data():
    shared_wikitext = shared_data("wikitext2")
    train, held_out = bundled_corpus_files("train")[0], bundled_corpus_files("heldout")[0]
    assert gzip.decompress(train.read_bytes()) == (shared_wikitext / "valid.txt").read_bytes()
    assert (shared_wikitext / "test.txt").read_text(encoding="utf-8").startswith(held_out.read_text(encoding="utf-8"))
    assert train.stat().st_size + held_out.stat().st_size <= 2 * 1024 * 1024
    with pytest.raises(ValueError, match="split"):
        bundled_corpus_files("validation")


def test_folders_streaming_and_saved_datasets(tmp_path, tokenizer):
    (tmp_path / "docs" / "nested").mkdir(parents=True)
    (tmp_path / "docs" / "a.txt").write_text("the first line\n\nsecond line here\n", encoding="utf-8")
    (tmp_path / "docs" / "nested" / "b.txt").write_text("another file\n", encoding="utf-8")
    assert [p.name for p in resolve_text_files([str(tmp_path / "docs")])] == ["a.txt", "b.txt"]
    assert len(load_text_corpus([str(tmp_path / "docs")])) == 3
    streamed = load_text_corpus([str(tmp_path / "docs")], streaming=True)
    assert isinstance(streamed, datasets.IterableDataset) and len(list(streamed)) == 3
    saved = datasets.Dataset.from_dict({"body": ["a saved dataset row", "  "]})
    saved.save_to_disk(str(tmp_path / "saved"))
    loaded = load_text_corpus([str(tmp_path / "saved")], text_column="body")
    assert loaded["text"] == ["a saved dataset row"]
    with pytest.raises(ValueError, match="no column 'content'"):
        load_text_corpus([str(tmp_path / "saved")], text_column="content")


def test_bad_files_are_named(tmp_path):
    with pytest.raises(RunSettingsError, match="missing.txt does not exist"):
        resolve_text_files([str(tmp_path / "missing.txt")])
    (tmp_path / "empty.txt").write_text("  \n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt is empty"):
        resolve_text_files([str(tmp_path / "empty.txt")])
    (tmp_path / "latin1.txt").write_bytes("line one\nline two\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt is not UTF-8: byte 0xe9 at line 3"):
        resolve_text_files([str(tmp_path / "latin1.txt")])
    (tmp_path / "no_text").mkdir()
    with pytest.raises(ValueError, match="contains no .txt files"):
        resolve_text_files([str(tmp_path / "no_text")])


def test_block_size_and_tokenizer_checks(tokenizer):
    config = MiniMoEConfig(max_position_embeddings=64)
    with pytest.raises(ValueError, match=r"`block_size` \(128\) exceeds the model's `max_position_embeddings` \(64\)"):
        check_model_compatibility(config, tokenizer, 128)
    with pytest.raises(ValueError, match="tokenizer has 30522 tokens but the model's `vocab_size` is 1000"):
        check_model_compatibility(MiniMoEConfig(vocab_size=1000), tokenizer, 64)
    check_model_compatibility(config, tokenizer, 64)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"block_size": 4}, "block_size"),
        ({"mlm_probability": 0.0}, "mlm_probability"),
        ({"max_train_blocks": 0}, "max_train_blocks"),
        ({"corpus": ["a.txt"], "dataset_name": "wikitext"}, "either `corpus` or `dataset_name`"),
    ],
)
def test_corpus_arguments_are_validated(fields, message):
    with pytest.raises(ValueError, match=message):
        CorpusArguments(**fields)


def _drawn(collator, blocks, seed=0):
    return collator.draw_training_targets(collator(blocks), torch.Generator().manual_seed(seed))


def test_mlm_collation_masks_fifteen_percent_with_80_10_10(tokenizer):
    blocks = [{"input_ids": list(range(1000, 1126))} for _ in range(64)]
    batch = _drawn(PretrainingCollator(tokenizer, 0.15), blocks)
    assert batch["input_ids"].shape == (64, 128)
    assert torch.all(batch["input_ids"][:, 0] == tokenizer.cls_token_id)
    assert torch.all(batch["labels"][:, [0, -1]] == -100)
    selected = batch["labels"] != -100
    assert 0.13 < selected.float().mean() < 0.17
    assert torch.equal(batch["labels"][selected], torch.arange(1000, 1126).repeat(64, 1)[selected[:, 1:-1]])
    masked = batch["input_ids"][selected] == tokenizer.mask_token_id
    kept = batch["input_ids"][selected] == batch["labels"][selected]
    assert 0.75 < masked.float().mean() < 0.85 and 0.06 < kept.float().mean() < 0.14
    original = torch.arange(1000, 1126).repeat(64, 1)
    unselected = ~selected[:, 1:-1]
    assert torch.equal(batch["input_ids"][:, 1:-1][unselected], original[unselected])  # only selected tokens change


def test_collation_is_deterministic_and_targets_depend_only_on_the_generator(tokenizer):
    """Collation draws nothing (it runs one batch ahead of training); the masks and NSP pairs come from the
    generator alone, whatever the global random state."""
    blocks = [{"input_ids": [1000 + i] * 61} for i in range(8)]
    collator = PretrainingCollator(tokenizer, 0.15, next_sentence_prediction=True)
    torch.manual_seed(1)
    plain = collator(blocks)
    assert set(plain) == {"input_ids", "attention_mask", "token_type_ids"}
    assert torch.equal(plain["input_ids"][:, 32:63], torch.tensor([[1000 + i] * 31 for i in range(8)]))
    first = _drawn(collator, blocks, seed=3)
    torch.manual_seed(2)
    torch.rand(100)
    second = _drawn(collator, blocks, seed=3)
    assert all(torch.equal(first[key], second[key]) for key in first)
    other = _drawn(collator, blocks, seed=4)
    assert not torch.equal(first["labels"], other["labels"])
    assert torch.equal(collator(blocks)["input_ids"], plain["input_ids"])  # drawing left the collated batch alone


def test_next_sentence_pairs(tokenizer):
    blocks = [{"input_ids": [1000 + i] * 125} for i in range(200)]
    batch = _drawn(PretrainingCollator(tokenizer, 0.15, next_sentence_prediction=True), blocks)
    assert batch["input_ids"].shape == (200, 128) and batch["token_type_ids"].shape == (200, 128)
    labels = batch["next_sentence_label"]
    assert 0.4 < labels.float().mean() < 0.6
    unmasked = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
    second_half = unmasked[:, 64:127]  # [CLS] a(62) [SEP] | b(63) [SEP]
    is_own = (second_half == torch.tensor([1000 + i for i in range(200)])[:, None]).float().mean(1) > 0.5
    assert torch.equal(is_own, labels == 0)
    first_half = unmasked[:, 1:63]
    assert (first_half == torch.tensor([1000 + i for i in range(200)])[:, None]).float().mean() > 0.97
    assert torch.all(batch["token_type_ids"][:, :64] == 0) and torch.all(batch["token_type_ids"][:, 64:] == 1)


def test_streaming_corpus_yields_the_same_blocks(tokenizer, tmp_path):
    config = MiniMoEConfig(max_position_embeddings=64)
    held_out = str(bundled_corpus_files("heldout")[0])
    eager, _ = prepare_block_datasets(
        CorpusArguments(corpus=[held_out], block_size=32, max_train_blocks=20), tokenizer, config, False
    )
    streamed, _ = prepare_block_datasets(
        CorpusArguments(corpus=[held_out], block_size=32, max_train_blocks=20, streaming=True),
        tokenizer,
        config,
        False,
    )
    assert isinstance(streamed, datasets.IterableDataset)
    assert [row["input_ids"] for row in streamed] == eager["input_ids"]


def test_long_paragraphs_are_cut_into_blocks_without_a_length_warning():
    from compact_bert.distillation.data import default_tokenizer
    from tests.log_records import recorded_messages

    with recorded_messages("transformers") as messages:  # transformers' records stop there (propagate off)
        fresh = default_tokenizer()  # the tokenizer warns once per instance: a fresh one shows whether it would
        paragraph = " ".join(f"word{index}" for index in range(700))  # > 512 tokens, as many corpus lines are
        blocks = build_block_dataset(datasets.Dataset.from_dict({"text": [paragraph]}), fresh, 128, with_pairs=False)
    assert len(blocks) > 4
    assert not [message for message in messages if "longer than the specified maximum" in message]


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 7, 1 << 20])
def test_corpus_files_are_checked_chunk_by_chunk_with_the_same_answers(tmp_path, chunk_bytes):
    """The UTF-8, NUL and blank checks read a corpus in chunks (``--streaming`` corpora larger than memory); a
    character split between chunks is still valid, and errors name the same line and offset at any chunk size."""
    from compact_bert.distillation.data import _check_text_file

    good = tmp_path / "good.txt"
    good.write_text("naïve café — ok\n日本語\n", encoding="utf-8")
    _check_text_file(good, chunk_bytes)
    bad = tmp_path / "bad.txt"
    bad.write_bytes("héllo\nwörld\n".encode() + b"caf\xe9\n")
    with pytest.raises(RunSettingsError, match=r"bad\.txt is not UTF-8: byte 0xe9 at line 3 \(offset 17\)"):
        _check_text_file(bad, chunk_bytes)
    cut = tmp_path / "cut.txt"
    cut.write_bytes("end in the middle of é".encode()[:-1])
    with pytest.raises(RunSettingsError, match=r"cut\.txt is not UTF-8: byte 0xc3 at line 1"):
        _check_text_file(cut, chunk_bytes)
    zeros = tmp_path / "zeros.txt"
    zeros.write_bytes(b"text\nmore\x00\x00\n")
    with pytest.raises(RunSettingsError, match=r"NUL bytes \(2 of 12 bytes, the first at line 2, offset 9\)"):
        _check_text_file(zeros, chunk_bytes)
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b" \n\t\n")
    with pytest.raises(RunSettingsError, match=r"blank\.txt is empty"):
        _check_text_file(blank, chunk_bytes)


def test_checking_a_large_corpus_holds_one_chunk_in_memory(tmp_path):
    """`--streaming` is for corpora larger than memory: the check before it must not read a file whole."""
    import tracemalloc

    from compact_bert.distillation.data import _check_text_file

    large = tmp_path / "large.txt"
    with large.open("w", encoding="utf-8") as handle:
        for index in range(500_000):
            handle.write(f"Sentence number {index} of a corpus that is larger than any chunk, with é and 日本.\n")
    assert large.stat().st_size > 40_000_000
    tracemalloc.start()
    try:
        _check_text_file(large)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, f"checking a {large.stat().st_size / 1e6:.0f} MB file held {peak / 1e6:.1f} MB"
