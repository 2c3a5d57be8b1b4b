"""Sentence-classification accuracy of exported ONNX models (fp32 and int8) on a GLUE-format TSV.

Used by the main job and the int8 recipe to report what quantization costs, measured the way a deployment runs
the model: onnxruntime on the CPU, the folder's own tokenizer, no PyTorch in the loop.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["OnnxAccuracy", "compare_onnx_models", "onnx_predictions", "read_labelled_sentences"]


@dataclass(frozen=True)
class OnnxAccuracy:
    """Accuracy of each model file and how often the files predict the same label."""

    examples: int
    accuracy: dict[str, float]
    agreement: float


def read_labelled_sentences(tsv_path: str | Path, limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """``sentence<TAB>label`` rows (GLUE SST-2's header); errors name the file and the line."""
    tsv_path = Path(tsv_path)
    sentences, labels = [], []
    with tsv_path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header != ["sentence", "label"]:
            raise ValueError(f"{tsv_path}: expected the header 'sentence<TAB>label', got {header!r}.")
        for line_number, row in enumerate(reader, start=2):
            if len(row) != 2 or row[1] not in ("0", "1"):
                raise ValueError(f"{tsv_path}, line {line_number}: expected '<sentence><TAB><0 or 1>', got {row!r}.")
            sentences.append(row[0])
            labels.append(int(row[1]))
            if limit is not None and len(sentences) == limit:
                break
    return sentences, np.array(labels)


def onnx_predictions(onnx_path: str | Path, tokenizer, sentences: list[str], max_length: int = 64,
                     batch_size: int = 32) -> np.ndarray:  # fmt: skip
    """The argmax label of each sentence from a ``text-classification`` export (its ``logits`` output)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    declared = {graph_input.name for graph_input in session.get_inputs()}
    predictions = []
    for start in range(0, len(sentences), batch_size):
        encoded = tokenizer(sentences[start : start + batch_size], padding=True, truncation=True,
                            max_length=max_length, return_tensors="np")  # fmt: skip
        feeds = {name: encoded[name].astype(np.int64) for name in declared if name in encoded}
        if "token_type_ids" in declared and "token_type_ids" not in feeds:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        (logits,) = session.run(["logits"], feeds)
        predictions.append(logits.argmax(-1))
    return np.concatenate(predictions)


def compare_onnx_models(onnx_paths: dict[str, Path], tokenizer, tsv_path: str | Path, limit: int | None = None,
                        max_length: int = 64) -> OnnxAccuracy:  # fmt: skip
    """Accuracy of every named model file on the same sentences, and the share of sentences on which all of them
    predict the same label."""
    sentences, labels = read_labelled_sentences(tsv_path, limit)
    predicted = {name: onnx_predictions(path, tokenizer, sentences, max_length) for name, path in onnx_paths.items()}
    stacked = np.stack(list(predicted.values()))
    agreement = float((stacked == stacked[0]).all(axis=0).mean())
    accuracy = {name: float((values == labels).mean()) for name, values in predicted.items()}
    return OnnxAccuracy(len(sentences), accuracy, agreement)
