"""Dense students as other tools take them, in processes that never import compact-bert: sentence-transformers loads
the embedding student without remote code, fastembed embeds with its ONNX export, optimum-cli (4.57 line, without
compact-bert's plug-in) exports the classifier, and ONNX Runtime's BERT optimizer fuses what compact-bert ships."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from compact_bert.cli.main import main
from compact_bert.distillation.data import packaged_teacher_dir
from compact_bert.embeddings.bundled_corpus import bundled_stsb_sentences
from compact_bert.embeddings.sentences import read_sentences
from compact_bert.evaluation.sts import bundled_sts_validation
from compact_bert.export.bert_onnx import OPTIMIZED_FILE, fused_operators
from tests.remote_code_helpers import BLOCK_COMPACT_BERT, load_in_fresh_process

pytest.importorskip("onnxruntime")

SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays an instrument on a stage.",
    "The weather is cold today.",
    "a gripping , beautifully shot film",
    "Three dogs run across a snowy field.",
]

SENTENCE_TRANSFORMERS_CHILD = BLOCK_COMPACT_BERT + textwrap.dedent(
    """
    import numpy, sentence_transformers

    folder, reference = sys.argv[1], sys.argv[2]
    model = sentence_transformers.SentenceTransformer(folder, device="cpu", trust_remote_code=False)
    expected = numpy.load(reference)
    produced = model.encode(json.loads(sys.argv[3]), convert_to_numpy=True)
    assert numpy.abs(produced - expected).max() < 1e-5, numpy.abs(produced - expected).max()
    assert type(model[0].auto_model).__module__.startswith("transformers.models.bert"), type(model[0].auto_model)
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    print("loaded")
    """
)


@pytest.fixture(scope="module")
def embedding_student(tmp_path_factory) -> Path:
    """``distill embeddings`` with the default (dense) student preset at the teacher's width and one layer, two
    steps: a sentence-transformers folder with no projection, so that any mean-pooling client reproduces it."""
    folder = tmp_path_factory.mktemp("embedding_student")
    sentences = folder / "sentences.txt"
    sentences.write_text("\n".join(read_sentences([bundled_stsb_sentences()])[:96]) + "\n")
    import gzip

    sts = gzip.decompress(bundled_sts_validation().read_bytes()).decode().splitlines()
    (folder / "sts.tsv").write_text("\n".join(sts[:41]) + "\n")
    output = folder / "student"
    argv = [
        "distill",
        "embeddings",
        "--student_overrides",
        json.dumps({"num_hidden_layers": 1, "intermediate_size": 128}),
        "--sentences",
        str(sentences),
        "--sts_file",
        str(folder / "sts.tsv"),
        "--teacher_cache_dir",
        str(folder / "cache"),
        "--output_dir",
        str(output),
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "32",
        "--max_seq_length",
        "48",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--use_cpu",
        "true",
    ]
    assert main(argv) == 0
    return output


def test_the_embedding_student_is_a_plain_sentence_transformers_folder(embedding_student, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    config = json.loads((embedding_student / "config.json").read_text())
    assert config["model_type"] == "bert" and "auto_map" not in config
    assert not list(embedding_student.rglob("*.py"))
    summary = json.loads((embedding_student / "run_summary.json").read_text())
    assert "trust_remote_code" not in summary["load_with"] and summary["projection"] is None
    model = sentence_transformers.SentenceTransformer(str(embedding_student), device="cpu")
    reference = tmp_path / "reference.npy"
    np.save(reference, model.encode(SENTENCES, convert_to_numpy=True))
    (tmp_path / "child.py").write_text(SENTENCE_TRANSFORMERS_CHILD)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(embedding_student), str(reference), json.dumps(SENTENCES)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "loaded" in result.stdout, result.stderr[-3000:]
    # its encoder is a plain BertModel for transformers alone too, on this line and the other
    batch = transformers.AutoTokenizer.from_pretrained(embedding_student)(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = transformers.AutoModel.from_pretrained(embedding_student).eval()(**batch).last_hidden_state
    torch.save({"inputs": dict(batch), "expected": hidden}, tmp_path / "encoder.pt")
    case = {
        "folder": str(embedding_student),
        "auto_name": "AutoModel",
        "output": "last_hidden_state",
        "reference": str(tmp_path / "encoder.pt"),
    }
    load_in_fresh_process([case], tmp_path / "transformers", plain=True)
    if os.environ.get("COMPACT_BERT_OTHER_PYTHON"):
        load_in_fresh_process(
            [case], tmp_path / "other-line", python=os.environ["COMPACT_BERT_OTHER_PYTHON"], plain=True
        )
    card = (embedding_student / "README.md").read_text(encoding="utf-8")
    assert "custom_code" not in card and "library_name: sentence-transformers" in card
    assert "arxiv:2004.09813" in card and "arxiv:2305.12129" not in card  # what made it, not MiniMoE


def test_fastembed_embeds_with_the_exported_student_as_sentence_transformers_does(embedding_student, tmp_path):
    """fastembed's custom-model API on the student's standard ONNX export (``feature-extraction``: the encoder; the
    client pools and normalises), fully offline: the same embeddings as sentence-transformers within 1e-4."""
    fastembed = pytest.importorskip("fastembed")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from fastembed.common.model_description import ModelSource, PoolingType

    assert (
        main(
            ["export", "onnx", str(embedding_student), str(embedding_student / "onnx"), "--task", "feature-extraction"]
        )
        == 0
    )
    name = "compact-bert-tests/embedding-student"
    if not any(model["model"].lower() == name.lower() for model in fastembed.TextEmbedding.list_supported_models()):
        fastembed.TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=name),
            dim=384,
            model_file="onnx/model.onnx",
            output_name="last_hidden_state",
        )
    embedder = fastembed.TextEmbedding(
        model_name=name,
        specific_model_path=str(embedding_student),
        cache_dir=str(tmp_path / "fastembed-cache"),
        threads=1,
        cuda=False,
        local_files_only=True,
    )
    produced = np.stack(list(embedder.embed(SENTENCES, batch_size=4)))
    expected = sentence_transformers.SentenceTransformer(str(embedding_student), device="cpu").encode(SENTENCES)
    assert np.abs(produced - expected).max() < 1e-4


def _optimum_python() -> str | None:
    if importlib.util.find_spec("optimum.exporters") is not None:
        return sys.executable
    return os.environ.get("COMPACT_BERT_OTHER_PYTHON")


def test_optimum_cli_exports_the_main_jobs_student_shape_without_compact_bert(tmp_path):
    """The student folder exported by Optimum's own BERT exporter (optimum-cli on the 4.57 line, compact-bert's
    plug-in kept out) gives PyTorch's logits, and ONNX Runtime's BERT optimizer fuses one Attention per layer in it
    and in compact-bert's own export of the same folder."""
    python = _optimum_python()
    if python is None:
        pytest.skip(
            "optimum-cli needs the 4.57 line: no interpreter with optimum-onnx here (COMPACT_BERT_OTHER_PYTHON)"
        )
    from benchmarks.bench_bert_onnx import export_with_optimum_cli, student_folder
    from compact_bert.export.bert_onnx import optimize_bert_graph
    from compact_bert.export.onnx_exporter import export_onnx

    folder = student_folder(tmp_path / "student", layers=2)
    anchor = export_with_optimum_cli(python, folder, tmp_path / "optimum")
    config = transformers.AutoConfig.from_pretrained(folder)
    assert optimize_bert_graph(anchor, config, tmp_path / "optimum" / OPTIMIZED_FILE)["Attention"] == 2
    ours = export_onnx(folder, folder / "onnx", "text-classification")
    assert ours.exporter == "torchscript" and ours.fused_operators["Attention"] == 2
    assert fused_operators(folder / "onnx" / "model.onnx") == {}  # the standard file has no contrib operators
    import onnxruntime

    tokenizer = transformers.AutoTokenizer.from_pretrained(packaged_teacher_dir())
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()(**batch).logits
    feeds = {name: tensor.numpy() for name, tensor in batch.items()}
    for path in (anchor, folder / "onnx" / "model.onnx", folder / "onnx" / OPTIMIZED_FILE):
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        declared = {graph_input.name for graph_input in session.get_inputs()}
        (logits,) = session.run(["logits"], {name: value for name, value in feeds.items() if name in declared})
        assert np.abs(logits - expected.numpy()).max() < 1e-4, path
