"""The embedding recipe's report from recorded runs: the table, the share kept, the latency ratios and the MoE
comparison, with the spread over seeds; and the bundled sentence slice rebuilt byte for byte from STS-B."""

from __future__ import annotations

import json

from compact_bert.embeddings.bundled_corpus import bundled_stsb_sentences, stsb_sentence_slice
from examples.embedding_results import SHAPES, write_report
from tests.conftest import shared_data


def _record(spearman: float) -> dict:
    return {
        "spearman": spearman,
        "recall": 93.0,
        "teacher_spearman": 86.0,
        "teacher_recall": 94.0,
        "steps": 100,
        "cpu_seconds": 300.0,
        "wall_seconds": 160.0,
    }


def test_report_table_ratios_and_moe_comparison(tmp_path):
    runs = {shape: [_record(84.0 + index), _record(85.0 + index)] for index, shape in enumerate(SHAPES)}
    keys = ("eager_b1", "onnx_b1", "int8_b1", "eager_b32", "onnx_b32", "int8_b32")
    latency = {"teacher": dict.fromkeys(keys, 10.0), **{shape: dict.fromkeys(keys, 4.0) for shape in SHAPES}}
    text = write_report(tmp_path, runs, latency, [0, 1], 5.0)
    first = next(line for line in text.splitlines() if line.startswith(f"| {SHAPES[0]} "))
    assert "84.50 ± 0.71" in first and f"{100 * 84.5 / 86.0:.1f}%" in first and "0.40×" in first and "| 5.0 |" in first
    assert "384 wide 84.50 vs 85.50, 192 wide 86.50 vs 87.50" in text
    assert json.loads((tmp_path / "results.json").read_text())["runs"][SHAPES[0]][0]["spearman"] == 84.0


def test_bundled_sentences_are_rebuilt_from_stsb_train():
    train = shared_data("stsb", "train.tsv")
    assert stsb_sentence_slice(train) == bundled_stsb_sentences().read_bytes()
