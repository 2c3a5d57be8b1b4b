"""Sentence-classification accuracy of exported models (ONNX and TFLite, fp32 and int8) on a GLUE-format TSV.

Used by the main job and the int8 recipe to report what quantization costs, measured the way a deployment runs
the model: onnxruntime or LiteRT's interpreter on the CPU, the folder's own tokenizer, no PyTorch in the loop.
A TFLite model runs at the one shape it was converted with, so sentences are padded to its length and batches
to its batch size (the padding rows' predictions are dropped).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "ExportedAccuracy",
    "compare_exported_models",
    "exported_predictions",
    "onnx_predictions",
    "read_labelled_sentences",
    "tflite_predictions",
]


@dataclass(frozen=True)
class ExportedAccuracy:
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


def onnx_predictions(
    onnx_path: str | Path, tokenizer, sentences: list[str], max_length: int = 64, batch_size: int = 32
) -> np.ndarray:
    """The argmax label of each sentence from a ``text-classification`` export (its ``logits`` output)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    declared = {graph_input.name for graph_input in session.get_inputs()}
    predictions = []
    for start in range(0, len(sentences), batch_size):
        encoded = tokenizer(
            sentences[start : start + batch_size],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="np",
        )
        feeds = {name: encoded[name].astype(np.int64) for name in declared if name in encoded}
        if "token_type_ids" in declared and "token_type_ids" not in feeds:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        (logits,) = session.run(["logits"], feeds)
        predictions.append(logits.argmax(-1))
    return np.concatenate(predictions)


def tflite_predictions(tflite_path: str | Path, tokenizer, sentences: list[str]) -> np.ndarray:
    """The argmax label of each sentence from a ``text-classification`` TFLite model, run at its fixed shape:
    sentences longer than its length are truncated, as ``onnx_predictions`` truncates at ``max_length``."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(tflite_path)).get_signature_runner()
    batch_size, length = (int(size) for size in runner.get_input_details()["input_ids"]["shape"])
    predictions = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start : start + batch_size]
        encoded = tokenizer(
            chunk + [""] * (batch_size - len(chunk)),
            padding="max_length",
            truncation=True,
            max_length=length,
            return_tensors="np",
        )
        feeds = {name: encoded[name].astype(np.int32) for name in runner.get_input_details() if name in encoded}
        if "token_type_ids" not in feeds:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        predictions.append(runner(**feeds)["logits"].argmax(-1)[: len(chunk)])
    return np.concatenate(predictions)


def exported_predictions(path: str | Path, tokenizer, sentences: list[str], max_length: int = 64) -> np.ndarray:
    """``onnx_predictions`` for ``.onnx`` files, ``tflite_predictions`` for ``.tflite`` files (at their own length)."""
    suffix = Path(path).suffix
    if suffix == ".onnx":
        return onnx_predictions(path, tokenizer, sentences, max_length)
    if suffix == ".tflite":
        return tflite_predictions(path, tokenizer, sentences)
    raise ValueError(f"{path}: expected a .onnx or .tflite model file.")


def compare_exported_models(
    model_paths: dict[str, Path], tokenizer, tsv_path: str | Path, limit: int | None = None, max_length: int = 64
) -> ExportedAccuracy:
    """Accuracy of every named model file on the same sentences, and the share of sentences on which all of them
    predict the same label."""
    sentences, labels = read_labelled_sentences(tsv_path, limit)
    predicted = {
        name: exported_predictions(path, tokenizer, sentences, max_length) for name, path in model_paths.items()
    }
    stacked = np.stack(list(predicted.values()))
    agreement = float((stacked == stacked[0]).all(axis=0).mean())
    accuracy = {name: float((values == labels).mean()) for name, values in predicted.items()}
    return ExportedAccuracy(len(sentences), accuracy, agreement)
