"""The bundled SST-2 slice is exactly what its regeneration function makes of the GLUE files."""

from __future__ import annotations

from pathlib import Path

import pytest

from compact_bert.finetuning.bundled_data import (
    SST2_SLICE_TRAIN_ROWS,
    bundled_sst2_files,
    main,
    sst2_slice_texts,
)

SHARED_SST2 = Path(__file__).resolve().parents[3] / "shared" / "data" / "sst2"


def test_bundled_files_have_the_glue_layout():
    files = bundled_sst2_files()
    train, validation = (files[split].read_bytes().decode("utf-8").split("\n") for split in ("train", "validation"))
    assert train[0] == validation[0] == "sentence\tlabel"
    assert len(train) == SST2_SLICE_TRAIN_ROWS + 2 and train[-1] == ""  # header, rows, final newline
    assert len(validation) == 872 + 2
    assert {line.rsplit("\t", 1)[1] for line in train[1:-1] + validation[1:-1]} == {"0", "1"}
    assert (files["train"].parent / "ATTRIBUTION.md").is_file()


@pytest.mark.skipif(
    not (SHARED_SST2 / "train.tsv").is_file(),
    reason=f"GLUE SST-2 is not checked out next to the project ({SHARED_SST2})",
)
def test_bundled_slice_is_reproducible_from_the_glue_files(tmp_path):
    expected = sst2_slice_texts(SHARED_SST2)
    files = bundled_sst2_files()
    for split in ("train", "validation"):
        assert files[split].read_bytes() == expected[split].encode("utf-8"), split
    assert files["validation"].read_bytes() == (SHARED_SST2 / "validation.tsv").read_bytes()
    assert main([str(SHARED_SST2), "--target_dir", str(tmp_path)]) == 0
    assert (tmp_path / "train.tsv").read_bytes() == files["train"].read_bytes()
    assert sst2_slice_texts(SHARED_SST2, seed=1)["train"] != expected["train"]  # the seed is what fixes the sample
