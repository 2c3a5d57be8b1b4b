"""``compact-bert export onnx --task sentence-embedding``: the whole sentence-transformers pipeline (encoder with its
experts, pooling, projection, normalisation) in one graph with one ``sentence_embedding`` output, equal to
``SentenceTransformer.encode`` (or compact-bert's own pooling where sentence-transformers is absent) on batches and
lengths other than the export example's; int8 beside it."""

from __future__ import annotations

import numpy as np
import pytest

from compact_bert.cli.main import main
from compact_bert.distillation.data import default_tokenizer
from compact_bert.embeddings import save_sentence_embedder
from compact_bert.export.sentence_embedding_parity import reference_embeddings
from tests.embeddings.helpers import SENTENCES, tiny_embedder

onnxruntime = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    work = tmp_path_factory.mktemp("sentence_embedding_export")
    save_sentence_embedder(tiny_embedder(projection_to=48, num_experts=4), work / "student", default_tokenizer())
    assert (
        main(
            [
                "export",
                "onnx",
                str(work / "student"),
                str(work / "onnx"),
                "--task",
                "sentence-embedding",
                "--quantize",
                "int8",
            ]
        )
        == 0
    )
    return work


def _run(path, sentences):
    batch = default_tokenizer()(sentences, padding=True, return_tensors="np")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [output.name for output in session.get_outputs()] == ["sentence_embedding"]
    return session.run(
        None, {name: batch[name].astype(np.int64) for name in ("input_ids", "attention_mask", "token_type_ids")}
    )[0]


@pytest.mark.parametrize("sentences", [SENTENCES[:1], SENTENCES, SENTENCES * 3 + ["word " * 60]])
def test_exported_embedding_equals_encode_on_other_batches_and_lengths(exported, sentences):
    produced = _run(exported / "onnx" / "model.onnx", sentences)
    expected, _ = reference_embeddings(exported / "student", sentences)
    np.testing.assert_allclose(produced, expected, atol=1e-4, rtol=0)
    assert produced.shape == (len(sentences), 48)
    np.testing.assert_allclose(np.linalg.norm(produced, axis=1), 1.0, atol=1e-5)


def test_int8_model_and_module_files_ship_beside_it(exported):
    folder = exported / "onnx"
    for name in ("modules.json", "1_Pooling/config.json", "2_Dense/config.json", "tokenizer.json", "config.json"):
        assert (folder / name).is_file(), name
    quantized = _run(folder / "model_quantized.onnx", SENTENCES)
    reference = _run(folder / "model.onnx", SENTENCES)
    cosine = (quantized * reference).sum(axis=1)
    assert cosine.min() > 0.9


def test_plain_model_folder_cannot_be_exported_as_sentence_embedding(exported, tmp_path):
    folder = tmp_path / "plain"
    tiny_embedder().encoder.save_pretrained(folder)
    with pytest.raises(SystemExit, match="not a sentence-transformers folder.*--pooling"):
        main(["export", "onnx", str(folder), str(tmp_path / "out"), "--task", "sentence-embedding"])
    with pytest.raises(SystemExit, match="cannot export 'sentence-embedding'"):
        main(
            [
                "export",
                "onnx",
                str(exported / "student"),
                str(tmp_path / "out2"),
                "--task",
                "sentence-embedding",
                "--exporter",
                "optimum",
            ]
        )
