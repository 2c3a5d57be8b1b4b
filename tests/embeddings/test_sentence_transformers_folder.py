"""Embedding students saved as sentence-transformers folders: what sentence-transformers itself loads, in a process
without compact-bert, with the same embeddings; folders sentence-transformers writes, read back the same way; and
folders this project cannot reproduce, refused with the file named."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from compact_bert.distillation.data import default_tokenizer, packaged_teacher_dir
from compact_bert.embeddings import (
    SentenceFolderError,
    load_sentence_embedder,
    read_embedding_head,
    save_sentence_embedder,
)
from compact_bert.embeddings.pooling import pool_tokens
from tests.embeddings.helpers import SENTENCES, tiny_embedder
from tests.remote_code_helpers import BLOCK_COMPACT_BERT

CHILD = BLOCK_COMPACT_BERT + textwrap.dedent(
    """
    import numpy
    from sentence_transformers import SentenceTransformer

    folder, sentences, output = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    model = SentenceTransformer(folder, device="cpu", trust_remote_code=True)
    numpy.save(output, model.encode(sentences, convert_to_numpy=True, batch_size=2))
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    print([type(module).__name__ for module in model])
    """
)


@pytest.mark.parametrize("pooling,projection_to", [("mean", 48), ("cls", None)])
def test_saved_student_loads_in_sentence_transformers_without_compact_bert_and_encodes_the_same(
    tmp_path, pooling, projection_to
):
    pytest.importorskip("sentence_transformers")
    import numpy

    embedder = tiny_embedder(projection_to, pooling)
    tokenizer = default_tokenizer()
    save_sentence_embedder(embedder, tmp_path / "student", tokenizer)
    expected = embedder.encode(SENTENCES, tokenizer, batch_size=2)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "student"), json.dumps(SENTENCES), str(tmp_path / "out.npy")],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "HF_HUB_OFFLINE": "1",
            "HF_MODULES_CACHE": str(tmp_path / "modules"),
            "PATH": "/usr/bin:/bin",
            "OMP_NUM_THREADS": "1",
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
    modules = ["Transformer", "Pooling", *(["Dense"] if projection_to else []), "Normalize"]
    assert result.stdout.strip().splitlines()[-1] == str(modules)
    produced = torch.from_numpy(numpy.load(tmp_path / "out.npy"))
    torch.testing.assert_close(produced, expected, atol=1e-6, rtol=0)


def test_folder_written_by_sentence_transformers_itself_reads_back_with_the_same_embeddings(tmp_path):
    """sentence-transformers 6 writes other type strings, a one-string pooling mode and the length in the tokenizer."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.SentenceTransformer(str(packaged_teacher_dir()), device="cpu")
    model.save(str(tmp_path / "saved"))
    head = read_embedding_head(tmp_path / "saved")
    assert (head.pooling, head.normalize, head.max_seq_length) == ("mean", True, model.max_seq_length)
    ours = load_sentence_embedder(tmp_path / "saved").encode(SENTENCES, default_tokenizer())
    torch.testing.assert_close(ours, torch.from_numpy(model.encode(SENTENCES)), atol=1e-6, rtol=0)


def test_packaged_teacher_encodes_as_sentence_transformers_does():
    sentence_transformers = pytest.importorskip("sentence_transformers")
    reference = sentence_transformers.SentenceTransformer(str(packaged_teacher_dir()), device="cpu")
    ours = load_sentence_embedder(packaged_teacher_dir()).encode(SENTENCES, default_tokenizer())
    torch.testing.assert_close(ours, torch.from_numpy(reference.encode(SENTENCES)), atol=1e-6, rtol=0)


def test_round_trip_keeps_head_and_weights(tmp_path):
    embedder = tiny_embedder(48, "max")
    save_sentence_embedder(embedder, tmp_path / "student", default_tokenizer())
    loaded = load_sentence_embedder(tmp_path / "student")
    assert (loaded.pooling, loaded.normalize, loaded.max_seq_length) == ("max", True, 64)
    torch.testing.assert_close(loaded.projection.weight, embedder.projection.weight)
    tokenizer = default_tokenizer()
    torch.testing.assert_close(loaded.encode(SENTENCES, tokenizer), embedder.encode(SENTENCES, tokenizer))


def test_pooling_ignores_padding():
    tokens = torch.randn(2, 5, 3)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    torch.testing.assert_close(pool_tokens(tokens, mask, "mean")[0], tokens[0, :3].mean(0))
    torch.testing.assert_close(pool_tokens(tokens, mask, "max")[0], tokens[0, :3].amax(0))
    torch.testing.assert_close(pool_tokens(tokens, mask, "mean_sqrt_len")[0], tokens[0, :3].sum(0) / 3**0.5)
    torch.testing.assert_close(pool_tokens(tokens, mask, "cls"), tokens[:, 0])


def _folder(tmp_path, modules, pooling=None):
    folder = tmp_path / "folder"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling or {"pooling_mode_mean_tokens": True}))
    return folder


TRANSFORMER = {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}


@pytest.mark.parametrize(
    "modules,pooling,message",
    [
        (
            [TRANSFORMER, POOLING, {"idx": 2, "path": "2_X", "type": "my_package.Custom"}],
            None,
            "type 'my_package.Custom'",
        ),
        ([TRANSFORMER, POOLING], {"pooling_mode_weightedmean_tokens": True}, "exactly one of"),
        ([TRANSFORMER, POOLING], {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True}, "exactly one of"),
        ([POOLING, TRANSFORMER], None, "Transformer, Pooling, then optionally"),
        ({"not": "a list"}, None, "must be a JSON list"),
    ],
)
def test_folders_this_project_cannot_reproduce_are_refused_with_the_file_named(tmp_path, modules, pooling, message):
    folder = _folder(tmp_path, modules, pooling)
    with pytest.raises(SentenceFolderError, match=message) as error:
        read_embedding_head(folder)
    assert str(folder) in str(error.value)


@pytest.mark.parametrize("where", ["parent", "absolute", "link"])
def test_a_module_path_leading_outside_the_folder_is_refused(tmp_path, where):
    """A modules.json whose module path is ``../outside``, absolute, or a link out of the folder would load weights
    from elsewhere (sentence-transformers refuses such paths too): refused, naming the file and the path."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    folder = _folder(tmp_path, [TRANSFORMER, POOLING])
    path = {"parent": "../outside", "absolute": str(outside), "link": "1_Link"}[where]
    if where == "link":
        (folder / "1_Link").symlink_to(outside)
    (folder / "modules.json").write_text(json.dumps([TRANSFORMER, {**POOLING, "path": path}]))
    with pytest.raises(SentenceFolderError, match=r"modules\.json: module .* leads outside .*folder") as error:
        read_embedding_head(folder)
    assert path in str(error.value)


def test_plain_model_folder_is_not_a_sentence_transformers_folder(tmp_path):
    with pytest.raises(SentenceFolderError, match="no modules.json.*--pooling"):
        read_embedding_head(tmp_path)


def test_sentence_transformers_trains_and_evaluates_a_saved_student(tmp_path):
    """sentence-transformers' own APIs take the folder: its evaluator scores it and its trainer fine-tunes it with
    its MSELoss (one step), and the result saves and reloads as a sentence-transformers folder."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments, losses
    from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator

    save_sentence_embedder(tiny_embedder(projection_to=48), tmp_path / "student", default_tokenizer())
    model = sentence_transformers.SentenceTransformer(str(tmp_path / "student"), device="cpu", trust_remote_code=True)
    evaluator = EmbeddingSimilarityEvaluator(
        SENTENCES[:4], SENTENCES[1:5], [0.9, 0.1, 0.5, 0.2], name="tiny", write_csv=False
    )
    assert "tiny_spearman_cosine" in evaluator(model)
    targets = torch.nn.functional.normalize(torch.randn(len(SENTENCES), 48), dim=1)
    data = Dataset.from_dict({"sentence": SENTENCES, "label": targets.tolist()})
    arguments = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "trained"),
        max_steps=1,
        per_device_train_batch_size=5,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
    )
    trainer = SentenceTransformerTrainer(model=model, args=arguments, train_dataset=data, loss=losses.MSELoss(model))
    trainer.train()
    model.save(str(tmp_path / "trained"))
    reloaded = load_sentence_embedder(tmp_path / "trained")
    torch.testing.assert_close(
        reloaded.encode(SENTENCES, default_tokenizer()), torch.from_numpy(model.encode(SENTENCES)), atol=1e-5, rtol=0
    )
