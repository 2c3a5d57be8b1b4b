"""A data file in a format the readers do not take is named as that format, with what to do instead — not answered
with advice about its encoding; a gzip-compressed table is read as the table it holds, whatever its name; a cache
that cannot be written is named with the setting that moves it, before the teacher runs."""

from __future__ import annotations

import gzip

import pytest

from compact_bert.distillation.teacher_cache import TeacherCacheError, cached_teacher_outputs
from compact_bert.finetuning.data import read_table
from compact_bert.training.run_errors import RunSettingsError

TABLE = "sentence\tlabel\na fine film\t1\na dull one\t0\n"


@pytest.mark.parametrize("name", ["train.tsv", "train.tsv.gz"])
def test_a_gzip_compressed_table_is_read_as_the_table_it_holds(tmp_path, name):
    plain = tmp_path / "plain.tsv"
    plain.write_text(TABLE)
    compressed = tmp_path / name
    compressed.write_bytes(gzip.compress(TABLE.encode()))
    assert read_table(compressed) == read_table(plain)


@pytest.mark.parametrize(
    ("content", "kind", "instead"),
    [
        (b"PAR1\x15\x04\x15", "a Parquet file", "--dataset_name"),
        (b"PK\x03\x04\x14\x00", "a ZIP archive (or an .xlsx / .docx file)", "export the sheet as .tsv or .csv"),
        (b"\xfd7zXZ\x00\x00\x04", "an xz-compressed file", "unxz"),
        (b"BZh91AY&SY", "a bzip2-compressed file", "bunzip2"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1", "an old Office document", "export the sheet"),
    ],
)
def test_a_binary_format_is_named_with_what_to_do_instead(tmp_path, content, kind, instead):
    path = tmp_path / "train.tsv"
    path.write_bytes(content + b"\x00" * 64)
    with pytest.raises(RunSettingsError) as raised:
        read_table(path)
    message = str(raised.value)
    assert f"is {kind}" in message and instead in message and "save the file as UTF-8" not in message


def test_utf16_and_other_binary_files_are_named_as_such(tmp_path):
    utf16 = tmp_path / "utf16.tsv"
    utf16.write_bytes(TABLE.encode("utf-16"))
    with pytest.raises(RunSettingsError, match="is UTF-16 text .*save it as UTF-8"):
        read_table(utf16)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\x01\x02\x00\x00\x07" * 100)
    with pytest.raises(RunSettingsError, match="holds NUL bytes: a binary file, not UTF-8 text"):
        read_table(binary)


def test_a_truncated_gzip_file_is_named_as_cut_short(tmp_path):
    path = tmp_path / "train.tsv.gz"
    path.write_bytes(gzip.compress(TABLE.encode() * 50)[:40])
    with pytest.raises(RunSettingsError, match="is gzip-compressed but cannot be decompressed .*Copy it again"):
        read_table(path)


@pytest.mark.parametrize("explicit", [True, False])
def test_a_cache_that_cannot_be_written_names_its_setting_before_the_teacher_runs(tmp_path, monkeypatch, explicit):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    computed = []
    if explicit:
        cache_dir, setting = blocker / "cache", "give --teacher_cache_dir a folder you can write to"
    else:
        monkeypatch.setenv("COMPACT_BERT_CACHE", str(blocker / "cache"))
        cache_dir, setting = None, "set $COMPACT_BERT_CACHE (or --teacher_cache_dir)"
    with pytest.raises(TeacherCacheError) as raised:
        cached_teacher_outputs(lambda: computed.append(True) or {}, {"teacher": "t"}, cache_dir)
    assert setting in str(raised.value) and str(blocker) in str(raised.value)
    assert computed == []  # refused before the teacher's outputs were computed
