"""The STS metrics against scipy and sentence-transformers' own evaluator on real STS Benchmark rows, and STS files
that are wrong refused with the file and line named."""

from __future__ import annotations

import gzip

import pytest
import torch

from compact_bert.evaluation.sts import (
    bundled_sts_validation,
    paraphrase_recall_at_1,
    read_sts_pairs,
    spearman,
    sts_spearman,
)
from compact_bert.training.run_errors import RunSettingsError
from tests.conftest import shared_data


def _embeddings(pairs, dimension=16, seed=0):
    """Embeddings that correlate with the gold scores but not perfectly (and tie nowhere)."""
    generator = torch.Generator().manual_seed(seed)
    first = torch.randn(len(pairs), dimension, generator=generator)
    noise = torch.randn(len(pairs), dimension, generator=generator)
    weight = torch.tensor(pairs.scores, dtype=torch.float32).unsqueeze(1) / 5
    return first, weight * first + (1 - weight) * noise


def test_bundled_dev_set_is_the_stsb_dev_split():
    pairs = read_sts_pairs(bundled_sts_validation())
    assert len(pairs) == 1500 and min(pairs.scores) >= 0 and max(pairs.scores) <= 5
    assert any('"' in sentence for sentence in pairs.sentence1 + pairs.sentence2)  # read with quoting off


def test_bundled_dev_set_equals_the_shared_copy():
    shared = shared_data("stsb", "validation.tsv")
    assert gzip.decompress(bundled_sts_validation().read_bytes()) == shared.read_bytes()


def test_spearman_of_cosines_equals_scipy_on_real_rows():
    stats = pytest.importorskip("scipy.stats")
    pairs = read_sts_pairs(bundled_sts_validation())
    first, second = _embeddings(pairs)
    cosines = torch.nn.functional.cosine_similarity(first.double(), second.double()).numpy()
    expected = 100 * stats.spearmanr(pairs.scores, cosines).statistic
    assert sts_spearman(first, second, pairs.scores) == pytest.approx(expected, abs=1e-9)
    # ties (the gold scores have many) get their average rank, as scipy ranks them
    assert spearman(pairs.scores, [round(score) for score in pairs.scores]) == pytest.approx(
        stats.spearmanr(pairs.scores, [round(score) for score in pairs.scores]).statistic, abs=1e-12
    )


def test_spearman_equals_sentence_transformers_evaluator(tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator

    from compact_bert.distillation.data import default_tokenizer, packaged_teacher_dir
    from compact_bert.embeddings import load_sentence_embedder
    from compact_bert.evaluation.sts import evaluate_sts

    pairs = read_sts_pairs(bundled_sts_validation())
    pairs.sentence1, pairs.sentence2, pairs.scores = pairs.sentence1[:200], pairs.sentence2[:200], pairs.scores[:200]
    model = sentence_transformers.SentenceTransformer(str(packaged_teacher_dir()), device="cpu")
    evaluator = EmbeddingSimilarityEvaluator(
        pairs.sentence1, pairs.sentence2, [score / 5 for score in pairs.scores], name="sts", write_csv=False
    )
    reference = evaluator(model, output_path=str(tmp_path))
    ours = evaluate_sts(load_sentence_embedder(packaged_teacher_dir()), default_tokenizer(), pairs)
    assert ours["spearman_cosine"] == pytest.approx(100 * reference["sts_spearman_cosine"], abs=1e-3)
    assert ours["pearson_cosine"] == pytest.approx(100 * reference["sts_pearson_cosine"], abs=1e-3)


def test_paraphrase_recall_counts_own_partner_as_nearest():
    first = torch.eye(3)
    assert paraphrase_recall_at_1(first, first.clone(), [5, 5, 5]) == 100.0
    assert paraphrase_recall_at_1(first, first[[1, 0, 2]], [5, 5, 5]) == pytest.approx(100 / 3)
    assert paraphrase_recall_at_1(first, first[[1, 0, 2]], [5, 5, 0]) == 0.0  # only pairs scored >= 4 count


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "sentence1\tsentence2\tscore\nA cat.\tA dog.\t5.5\n",
            r"line 2: score 5.5 is outside the declared range \[0.0, 5.0\]",
        ),
        ("sentence1\tsentence2\nA cat.\tA dog.\n", "has no column 'score'"),
        ("sentence1\tsentence2\tscore\nA cat.\tA\tdog.\t3.0\n", "line 2: 4 tab-separated fields, the header has 3"),
        ("sentence1\tsentence2\tscore\nA cat.\tA dog.\tvery\n", "line 2: score 'very' is not a number"),
        ("sentence1\tsentence2\tscore\nA cat.\t \t1.0\n", "line 2: an empty sentence"),
        ("sentence1\tsentence2\tscore\nA cat.\tA dog.\t1.0\n", "holds 1 pair"),
    ],
)
def test_wrong_sts_files_are_refused_naming_file_and_line(tmp_path, text, message):
    path = tmp_path / "sts.tsv"
    path.write_text(text)
    with pytest.raises(RunSettingsError, match=message) as error:
        read_sts_pairs(path)
    assert str(path) in str(error.value)


def test_quotes_never_join_rows(tmp_path):
    path = tmp_path / "sts.tsv"
    path.write_text('sentence1\tsentence2\tscore\n"A quoted\tstart.\t1.0\nA "b".\tC.\t2.0\n')
    pairs = read_sts_pairs(path)
    assert pairs.sentence1 == ['"A quoted', 'A "b".'] and pairs.scores == [1.0, 2.0]


def test_evaluate_command_scores_the_packaged_teacher(tmp_path, capsys):
    import json

    from compact_bert.cli.main import main

    lines = gzip.decompress(bundled_sts_validation().read_bytes()).decode().splitlines()
    (tmp_path / "sts.tsv").write_text("\n".join(lines[:151]) + "\n")
    assert main(["evaluate", "sts", "all-MiniLM-L6-v2", "--sts_file", str(tmp_path / "sts.tsv")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["pairs"] == 150 and 80 < printed["spearman_cosine"] < 100


def test_evaluate_command_names_a_folder_without_pooling(tmp_path):
    from compact_bert.cli.main import main

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"MODEL_DIR .*is not a sentence-transformers folder \(no modules.json\)"):
        main(["evaluate", "sts", str(tmp_path)])
