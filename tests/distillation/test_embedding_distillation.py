"""``compact-bert distill embeddings`` at tiny size against the real packaged teacher: the student gets closer to the
teacher's embeddings and better on STS-B than the untrained student, resumes from its checkpoints, starts from the
teacher where the shapes allow, and refuses bad input before any training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from compact_bert.cli.main import main
from compact_bert.distillation.data import default_tokenizer, packaged_teacher_dir
from compact_bert.distillation.embedding_trainer import embedding_distillation_loss
from compact_bert.embeddings import load_sentence_embedder
from compact_bert.embeddings.bundled_corpus import bundled_stsb_sentences
from compact_bert.embeddings.sentences import read_sentences
from compact_bert.evaluation.sts import bundled_sts_validation, read_sts_pairs
from compact_bert.jobs import distill_embeddings

TINY = json.dumps(
    {
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "num_experts": 2,
        "max_position_embeddings": 128,
    }
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """600 bundled training sentences and the first 300 STS-B dev pairs, as files."""
    folder = tmp_path_factory.mktemp("embedding_data")
    sentences = read_sentences([bundled_stsb_sentences()])[:600]
    (folder / "sentences.txt").write_text("\n".join(sentences) + "\n")
    lines = bundled_sts_validation().open("rb").read()
    import gzip

    text = gzip.decompress(lines).decode().splitlines()
    (folder / "sts.tsv").write_text("\n".join(text[:301]) + "\n")
    return folder


def _flags(data: Path, output: Path, *extra: str) -> list[str]:
    return [
        "distill",
        "embeddings",
        "--student_preset",
        "minimoe-4l-192h",
        "--student_overrides",
        TINY,
        "--init_from_teacher",
        "none",
        "--sentences",
        str(data / "sentences.txt"),
        "--sts_file",
        str(data / "sts.tsv"),
        "--teacher_cache_dir",
        str(data / "cache"),
        "--output_dir",
        str(output),
        "--per_device_train_batch_size",
        "32",
        "--learning_rate",
        "1e-3",
        "--warmup_steps",
        "0",
        "--max_seq_length",
        "48",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--logging_steps",
        "10",
        "--use_cpu",
        "true",
        *extra,
    ]


def _teacher_mse(folder: Path, sentences: list[str]) -> float:
    tokenizer = default_tokenizer()
    student = load_sentence_embedder(folder).encode(sentences, tokenizer)
    teacher = load_sentence_embedder(packaged_teacher_dir()).encode(sentences, tokenizer)
    return float(embedding_distillation_loss(student, teacher))


def test_distillation_moves_a_tiny_student_toward_the_teacher_and_raises_sts(data, tmp_path):
    assert main(_flags(data, tmp_path / "untrained", "--max_steps", "1", "--learning_rate", "1e-12")) == 0
    assert main(_flags(data, tmp_path / "trained", "--max_steps", "60")) == 0
    untrained = json.loads((tmp_path / "untrained" / "run_summary.json").read_text())
    trained = json.loads((tmp_path / "trained" / "run_summary.json").read_text())
    held_out = read_sts_pairs(data / "sts.tsv").sentences()[:200]
    assert _teacher_mse(tmp_path / "trained", held_out) < 0.8 * _teacher_mse(tmp_path / "untrained", held_out)
    assert trained["eval_loss"] < untrained["eval_loss"]
    assert trained["eval_sts_spearman_cosine"] > untrained["eval_sts_spearman_cosine"] + 5
    assert trained["projection"] == [64, 384]  # a 64-wide student projects to the teacher's 384
    assert trained["teacher_sts"]["spearman_cosine"] > 80
    assert (tmp_path / "trained" / "2_Dense" / "model.safetensors").is_file()


def test_interrupted_run_resumes_from_its_sentence_transformers_checkpoint(data, tmp_path):
    """A run stopped after step 3 (a constant learning rate, so that stopping there is the same as an interruption)
    and resumed to step 6 ends with the weights of a run that went straight to step 6."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    constant = ["--lr_scheduler_type", "constant"]
    assert main(_flags(data, straight, "--max_steps", "6", "--save_strategy", "no", *constant)) == 0
    assert (
        main(_flags(data, resumed, "--max_steps", "3", "--save_steps", "3", "--keep_checkpoints", "true", *constant))
        == 0
    )
    assert (resumed / "checkpoint-3" / "modules.json").is_file()  # every checkpoint is a sentence-transformers folder
    assert (
        main(
            _flags(
                data, resumed, "--max_steps", "6", "--save_steps", "3", "--resume_from_checkpoint", "last", *constant
            )
        )
        == 0
    )
    first, second = load_sentence_embedder(straight), load_sentence_embedder(resumed)
    for (name, expected), actual in zip(first.encoder.state_dict().items(), second.encoder.state_dict().values()):
        torch.testing.assert_close(actual, expected, msg=name)
    torch.testing.assert_close(second.projection.weight, first.projection.weight)


def test_student_of_the_teacher_shape_starts_as_the_teacher_on_its_layers(data, tmp_path):
    """With the teacher's own layers and width the initialized student is the teacher: zero distance at step 0."""
    teacher, tokenizer = distill_embeddings.load_teacher_embedder("all-MiniLM-L6-v2", None, True, 64)
    arguments = distill_embeddings.EmbeddingStudentArguments(
        student_preset="minilm-4l-384h",
        student_overrides=json.dumps({"num_hidden_layers": 6}),
        layer_map="0,1,2,3,4,5",
    )
    from compact_bert.distillation.embedding_data import tokenize_sentences

    sentences = read_sentences([data / "sentences.txt"])[:64]
    student, record = distill_embeddings._student_embedder(
        arguments, teacher, tokenizer, tokenize_sentences(sentences, tokenizer, 64), 0, 64
    )
    assert student.projection is None and record["layer_map"] == [0, 1, 2, 3, 4, 5]
    torch.testing.assert_close(
        student.encode(sentences, tokenizer), teacher.encode(sentences, tokenizer), atol=1e-5, rtol=0
    )


def test_narrow_student_projection_starts_by_putting_kept_channels_back():
    teacher, _ = distill_embeddings.load_teacher_embedder("all-MiniLM-L6-v2", None, True, 64)
    projection = distill_embeddings.build_projection(3, teacher, [5, 0, 7])
    vector = torch.tensor([[1.0, 2.0, 3.0]])
    expected = torch.zeros(1, 384)
    expected[0, [5, 0, 7]] = vector
    torch.testing.assert_close(projection(vector), expected)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--teacher", "{plain}"], "is not a sentence-transformers folder \\(no modules.json\\) and no --pooling"),
        (
            ["--projection", "none"],
            "--projection none: the student's hidden_size 64 differs from the teacher's embedding size 384",
        ),
        (
            ["--per_device_train_batch_size", "1000"],
            "hold 600 distinct sentence\\(s\\), fewer than one batch \\(1000\\)",
        ),
        (["--sts_file", "{bad_sts}"], "line 2: score 9.0 is outside the declared range"),
        (["--pooling", "median"], "--pooling must be one of mean, cls, max, mean_sqrt_len"),
    ],
)
def test_bad_input_fails_before_training_with_one_line(data, tmp_path, capsys, extra, message):
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (plain / name).symlink_to(packaged_teacher_dir() / name)
    (tmp_path / "bad.tsv").write_text("sentence1\tsentence2\tscore\nA.\tB.\t9.0\nC.\tD.\t1.0\n")
    extra = [item.format(plain=plain, bad_sts=tmp_path / "bad.tsv") for item in extra]
    with pytest.raises(SystemExit) as error:
        main([*_flags(data, tmp_path / "out", "--max_steps", "2"), *extra])
    assert error.value.code != 0
    assert pytest.importorskip("re").search(message, str(error.value)), str(error.value)
    assert not (tmp_path / "out" / "model.safetensors").exists()
