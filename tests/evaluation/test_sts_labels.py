"""Only the STS Benchmark dev set is called that: output and cards name any other STS file by its name."""

from __future__ import annotations

import gzip

from compact_bert.evaluation.sts import bundled_sts_validation, is_sts_benchmark_dev, sts_data_label


def test_the_dev_set_is_recognised_by_content_under_any_name_and_other_files_are_named(tmp_path):
    copy = tmp_path / "my-copy.tsv"
    copy.write_bytes(gzip.decompress(bundled_sts_validation().read_bytes()))
    assert is_sts_benchmark_dev(bundled_sts_validation()) and is_sts_benchmark_dev(copy)
    assert sts_data_label(None) == sts_data_label(copy) == "STS Benchmark dev"
    other = tmp_path / "validation.tsv"  # the dev set's file name, other pairs
    other.write_text("sentence1\tsentence2\tscore\nA man plays.\tSomeone plays.\t4.2\n")
    assert not is_sts_benchmark_dev(other) and sts_data_label(other) == "STS file validation.tsv"
