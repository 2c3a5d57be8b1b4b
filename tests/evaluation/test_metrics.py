"""The metrics shipped in compact_bert.evaluation against references computed another way.

GLUE scores are checked against scikit-learn / SciPy called directly; the CoNLL metric (which uses seqeval)
against hand-counted entities, an independent entity counter written here from conlleval's chunking rules,
and seqeval's ``classification_report``; the GLUE score against BERT-base's published leaderboard score.
Real data come from the shared folder next to the checkout and are skipped, with the reason, without it.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
import textwrap
import warnings
from collections import Counter
from pathlib import Path

import pytest

evaluate = pytest.importorskip("evaluate")
sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="needs the metrics extra: compact-bert[metrics]")
scipy_stats = pytest.importorskip("scipy.stats", reason="needs the metrics extra: compact-bert[metrics]")
seqeval_metrics = pytest.importorskip("seqeval.metrics", reason="needs the metrics extra: compact-bert[metrics]")

from compact_bert import evaluation  # noqa: E402
from compact_bert.evaluation import glue_score, glue_task_scores, load_metric, metric_path  # noqa: E402
from tests.conftest import shared_data  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
CLASSIFICATION_TASKS = (
    "sst2",
    "mrpc",
    "qqp",
    "cola",
    "mnli",
    "mnli_matched",
    "mnli_mismatched",
    "qnli",
    "rte",
    "wnli",
    "ax",
)
ALL_TASKS = (*CLASSIFICATION_TASKS, "stsb")


def _shared_file(relative: str) -> Path:
    return shared_data(*relative.split("/"))


def _no_warnings(function, *args, **kwargs):
    """Call ``function`` with every warning turned into an error, so that none can leak to the user."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return function(*args, **kwargs)


def _assert_same_scores(result: dict, expected: dict) -> None:
    """Equal keys and equal values within float rounding, one level of nesting (per-entity-type dicts) deep."""
    assert set(result) == set(expected)
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, abs=1e-12), key


# --- loading ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", evaluation.METRIC_NAMES)
def test_metric_path_is_the_folder_inside_the_package(name):
    folder = Path(metric_path(name))
    assert folder.parent.parent == Path(evaluation.__file__).resolve().parent
    assert (folder / f"{name}.py").is_file()


def test_unknown_metric_name_lists_the_shipped_ones():
    with pytest.raises(ValueError, match="glue, conll_ner"):
        metric_path("accuracy")


@pytest.mark.parametrize(
    ("name", "config_name", "cited"), [("glue", "sst2", "Wang"), ("conll_ner", None, "Tjong Kim Sang")]
)
def test_evaluate_loads_each_metric_by_path_offline(name, config_name, cited):
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    metric = evaluate.load(metric_path(name), config_name)
    assert cited in metric.citation and metric.description
    assert set(metric.features) == {"predictions", "references"}
    if name == "conll_ner":
        assert "Nakayama" in metric.citation


def test_packaging_lists_every_metric_folder():
    tomllib = pytest.importorskip("tomllib")
    pyproject = REPO_ROOT / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip(f"needs the checkout's {pyproject}")
    packages = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["packages"]
    assert "compact_bert.evaluation" in packages
    for name in evaluation.METRIC_NAMES:
        assert f"compact_bert.evaluation.metrics.{name}" in packages


def test_metrics_load_from_a_copy_of_the_package_elsewhere(tmp_path):
    """A wheel install puts the package in site-packages: paths must follow the package, not the checkout."""
    site = tmp_path / "site-packages"
    shutil.copytree(Path(evaluation.__file__).resolve().parent, site / "compact_bert" / "evaluation")
    (site / "compact_bert" / "__init__.py").write_text("")  # the real one would import torch: not needed here
    script = textwrap.dedent(
        """
        import json
        from compact_bert.evaluation import load_metric, metric_path
        print(json.dumps({
            "paths": [metric_path("glue"), metric_path("conll_ner")],
            "glue": load_metric("glue", "mrpc").compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0]),
            "conll": load_metric("conll_ner").compute(predictions=[["B-PER", "O"]], references=[["B-PER", "O"]]),
        }))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(Path(path).is_relative_to(site) for path in result["paths"])
    assert result["glue"] == pytest.approx({"accuracy": 0.75, "f1": 2 / 3})
    assert result["conll"]["overall_f1"] == 1.0


def test_a_missing_metrics_extra_is_an_error_that_names_it(tmp_path):
    """Without scikit-learn / SciPy / seqeval, loading says which extra to install (a fresh process, because
    evaluate caches imported metric modules)."""
    script = textwrap.dedent(
        """
        import sys
        import evaluate
        from compact_bert.evaluation import metric_path
        for name in ("scipy", "scipy.stats", "sklearn", "sklearn.metrics", "seqeval", "seqeval.metrics",
                     "seqeval.scheme"):
            sys.modules[name] = None  # makes `import name` raise ImportError
        for name, config_name in (("glue", "sst2"), ("conll_ner", None)):
            try:
                evaluate.load(metric_path(name), config_name)
            except ImportError as error:
                print(name, error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    messages = done.stdout.strip().splitlines()[-2:]
    assert messages[0].startswith("glue ") and messages[1].startswith("conll_ner ")
    assert all("pip install 'compact-bert[metrics]'" in message for message in messages)


# --- GLUE ---------------------------------------------------------------------------------------------------


def _references_for(task: str) -> dict:
    """What each task's metric should return, from scikit-learn / SciPy called directly."""

    def references(predictions, labels):
        if task == "stsb":
            return {
                "pearson": scipy_stats.pearsonr(labels, predictions)[0],
                "spearmanr": scipy_stats.spearmanr(labels, predictions)[0],
            }
        if task == "cola":
            return {"matthews_correlation": sklearn_metrics.matthews_corrcoef(labels, predictions)}
        result = {"accuracy": sklearn_metrics.accuracy_score(labels, predictions)}
        if task in ("mrpc", "qqp"):
            result["f1"] = sklearn_metrics.f1_score(labels, predictions)
        return result

    return references


def _random_task_data(task: str, size: int, seed: int):
    rng = random.Random(seed)
    if task == "stsb":
        labels = [round(rng.uniform(0, 5), 1) for _ in range(size)]  # rounded: ties, as in STS-B's gold scores
        return [label + rng.gauss(0, 1) for label in labels], labels
    num_classes = 3 if task.startswith("mnli") or task == "ax" else 2
    labels = [rng.randrange(num_classes) for _ in range(size)]
    predictions = [label if rng.random() < 0.7 else rng.randrange(num_classes) for label in labels]
    return predictions, labels


@pytest.mark.parametrize("task", ALL_TASKS)
def test_glue_matches_sklearn_and_scipy(task):
    predictions, labels = _random_task_data(task, size=200, seed=ALL_TASKS.index(task))
    result = load_metric("glue", task).compute(predictions=predictions, references=labels)
    assert result == pytest.approx(_references_for(task)(predictions, labels), abs=1e-12)


def test_glue_binary_metrics_on_real_sst2_labels():
    """SST-2's dev labels with 15% of them flipped (seeded) as predictions, scored as SST-2, MRPC and CoLA."""
    lines = _shared_file("sst2/validation.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == ["sentence", "label"]
    labels = [int(line.rsplit("\t", 1)[1]) for line in lines[1:]]
    assert len(labels) == 872
    rng = random.Random(2018)
    predictions = [1 - label if rng.random() < 0.15 else label for label in labels]
    for task in ("sst2", "mrpc", "cola"):
        result = load_metric("glue", task).compute(predictions=predictions, references=labels)
        assert result == pytest.approx(_references_for(task)(predictions, labels), abs=1e-12)
    assert 0.6 < result["matthews_correlation"] < 0.8  # about 1 - 2 * 0.15: the flips are really there


def test_glue_hand_computed_values():
    # MRPC: one true positive, one false positive, two true negatives: precision 1/2, recall 1, F1 2/3.
    mrpc = load_metric("glue", "mrpc").compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0])
    assert mrpc == pytest.approx({"accuracy": 0.75, "f1": 2 / 3})
    # CoLA, same counts: MCC = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = 2 / sqrt(12).
    cola = load_metric("glue", "cola").compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0])
    assert cola["matthews_correlation"] == pytest.approx(2 / math.sqrt(12))
    # STS-B: predictions a monotone but non-linear function of the labels: Spearman 1, Pearson below 1.
    stsb = load_metric("glue", "stsb").compute(predictions=[0.0, 1.0, 8.0, 27.0], references=[0, 1, 2, 3])
    assert stsb["spearmanr"] == pytest.approx(1.0) and 0.9 < stsb["pearson"] < 1.0


def test_glue_add_batch_equals_one_compute():
    predictions, labels = _random_task_data("qqp", size=90, seed=7)
    metric = load_metric("glue", "qqp")
    for start in range(0, 90, 32):
        metric.add_batch(predictions=predictions[start : start + 32], references=labels[start : start + 32])
    assert metric.compute() == pytest.approx(_references_for("qqp")(predictions, labels), abs=1e-12)


def test_glue_all_one_class_scores_without_warnings():
    ones = [1] * 10
    assert _no_warnings(load_metric("glue", "cola").compute, predictions=ones, references=ones) == {
        "matthews_correlation": 0.0
    }
    assert _no_warnings(load_metric("glue", "sst2").compute, predictions=ones, references=ones) == {"accuracy": 1.0}
    # No positive predicted nor present: F1 is 0/0, reported as 0 (scikit-learn's zero_division=0).
    zeros = [0] * 10
    assert _no_warnings(load_metric("glue", "qqp").compute, predictions=zeros, references=zeros) == {
        "accuracy": 1.0,
        "f1": 0.0,
    }
    # A model that never predicts the positive class: F1 0 as well, and still no warning.
    result = _no_warnings(load_metric("glue", "mrpc").compute, predictions=zeros, references=[0, 1] * 5)
    assert result == {"accuracy": 0.5, "f1": 0.0}


def test_glue_constant_stsb_predictions_have_undefined_pearson():
    with pytest.warns(scipy_stats.ConstantInputWarning):
        result = load_metric("glue", "stsb").compute(predictions=[2.5] * 4, references=[0.0, 1.0, 2.0, 3.0])
    assert math.isnan(result["pearson"]) and math.isnan(result["spearmanr"])


@pytest.mark.parametrize("task", CLASSIFICATION_TASKS)
def test_glue_single_example(task):
    result = _no_warnings(load_metric("glue", task).compute, predictions=[1], references=[1])
    expected = _references_for(task)([1], [1]) if task != "cola" else {"matthews_correlation": 0.0}
    assert result == pytest.approx(expected)


def test_glue_stsb_needs_two_examples():
    with pytest.raises(ValueError, match="at least 2 example"):
        load_metric("glue", "stsb").compute(predictions=[1.0], references=[1.0])


@pytest.mark.parametrize("task", ("sst2", "stsb"))
def test_glue_empty_input_is_a_clear_error(task):
    with pytest.raises(ValueError, match="at least .* example"):
        load_metric("glue", task).compute(predictions=[], references=[])


@pytest.mark.parametrize("config_name", ("squad", None))
def test_glue_unknown_task_lists_the_valid_names(config_name):
    with pytest.raises(ValueError, match="unknown GLUE task") as error:
        load_metric("glue", config_name)
    assert all(task in str(error.value) for task in ALL_TASKS)


# --- CoNLL entity level ------------------------------------------------------------------------------------


def _split_tag(tag: str) -> tuple[str, str]:
    return ("O", "") if tag == "O" else (tag[0], tag[2:])


def _conlleval_entities(tags: list[str]) -> set[tuple[str, int, int]]:
    """(type, first, last) of each chunk, by conlleval's rules for BIO tags, written independently of seqeval.

    A chunk ends before a token that is O, B-, or of another type; it starts at B-, or at I- after O or after
    a chunk of another type (an I- without B- opens an entity).
    """
    entities = set()
    start, current = None, None
    for position, tag in enumerate([*tags, "O"]):
        prefix, kind = _split_tag(tag)
        if current is not None and (prefix in ("O", "B") or kind != current):
            entities.add((current, start, position - 1))
            current = None
        if prefix == "B" or (prefix == "I" and current is None):
            start, current = position, kind
    return entities


def _counted_scores(predictions, references) -> dict:
    """Per-type and micro-averaged precision / recall / F1 from entity counts, F1 0 when a count is 0."""
    gold, predicted, correct = Counter(), Counter(), Counter()
    for predicted_tags, gold_tags in zip(predictions, references):
        gold_entities, predicted_entities = _conlleval_entities(gold_tags), _conlleval_entities(predicted_tags)
        gold.update(kind for kind, _, _ in gold_entities)
        predicted.update(kind for kind, _, _ in predicted_entities)
        correct.update(kind for kind, _, _ in gold_entities & predicted_entities)

    def prf(tp, num_predicted, num_gold):
        precision = tp / num_predicted if num_predicted else 0.0
        recall = tp / num_gold if num_gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    scores = {}
    for kind in sorted(set(gold) | set(predicted)):
        precision, recall, f1 = prf(correct[kind], predicted[kind], gold[kind])
        scores[kind] = {"precision": precision, "recall": recall, "f1": f1, "number": gold[kind]}
    precision, recall, f1 = prf(sum(correct.values()), sum(predicted.values()), sum(gold.values()))
    tokens = [(p, g) for ps, gs in zip(predictions, references) for p, g in zip(ps, gs)]
    scores.update(
        overall_precision=precision,
        overall_recall=recall,
        overall_f1=f1,
        overall_accuracy=sum(p == g for p, g in tokens) / len(tokens),
    )
    return scores


def _seqeval_scores(predictions, references) -> dict:
    report = seqeval_metrics.classification_report(references, predictions, output_dict=True, zero_division=0)
    scores = {
        kind: {"precision": s["precision"], "recall": s["recall"], "f1": s["f1-score"], "number": s["support"]}
        for kind, s in report.items()
        if not kind.endswith(" avg")
    }
    micro = report["micro avg"]
    scores.update(
        overall_precision=micro["precision"],
        overall_recall=micro["recall"],
        overall_f1=micro["f1-score"],
        overall_accuracy=seqeval_metrics.accuracy_score(references, predictions),
    )
    return scores


def _read_conll(path: Path) -> list[list[str]]:
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            current.append(line.split()[-1])
        elif current:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


def _perturb(sentences: list[list[str]], seed: int) -> list[list[str]]:
    """Predictions from gold tags: 8% of tokens get a random tag, 4% of B- tags become I- (I- without B-)."""
    rng = random.Random(seed)
    tags = sorted({tag for sentence in sentences for tag in sentence})
    predictions = []
    for sentence in sentences:
        predicted = []
        for tag in sentence:
            draw = rng.random()
            if draw < 0.08:
                tag = rng.choice(tags)
            elif draw < 0.12 and tag.startswith("B-"):
                tag = "I-" + tag[2:]
            predicted.append(tag)
        predictions.append(predicted)
    return predictions


def test_conll_hand_counted_cases():
    conll = load_metric("conll_ner")
    perfect = conll.compute(predictions=[["B-PER", "I-PER", "O"]], references=[["B-PER", "I-PER", "O"]])
    assert perfect == {
        "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 1},
        "overall_precision": 1.0,
        "overall_recall": 1.0,
        "overall_f1": 1.0,
        "overall_accuracy": 1.0,
    }
    # Gold PER(0-1) and LOC(3); predicted PER(0) and LOC(3): the truncated PER is wrong, LOC right.
    partial = conll.compute(predictions=[["B-PER", "O", "O", "B-LOC"]], references=[["B-PER", "I-PER", "O", "B-LOC"]])
    assert partial["PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "number": 1}
    assert partial["LOC"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 1}
    assert (partial["overall_precision"], partial["overall_recall"], partial["overall_f1"]) == (0.5, 0.5, 0.5)
    assert partial["overall_accuracy"] == 0.75
    # B-PER I-LOC is two entities, PER(0) and LOC(1), neither the gold PER(0-1): precision 0/2, recall 0/1.
    split = conll.compute(predictions=[["B-PER", "I-LOC"]], references=[["B-PER", "I-PER"]])
    assert split["LOC"]["number"] == 0 and split["PER"]["number"] == 1
    assert split["overall_f1"] == 0.0 and split["overall_accuracy"] == 0.5


def test_conll_i_tag_without_b_starts_an_entity_as_in_seqeval_default_mode():
    predictions = [["I-ORG", "I-ORG", "O"], ["O", "I-PER", "I-PER"]]
    references = [["B-ORG", "I-ORG", "O"], ["O", "B-PER", "I-PER"]]
    result = load_metric("conll_ner").compute(predictions=predictions, references=references)
    assert result["overall_f1"] == 1.0 and result["overall_accuracy"] == pytest.approx(4 / 6)
    _assert_same_scores(result, _seqeval_scores(predictions, references))
    # In strict IOB2 mode the same I- tags are not entities.
    strict = load_metric("conll_ner").compute(
        predictions=predictions, references=references, mode="strict", scheme="IOB2"
    )
    assert strict["overall_precision"] == 0.0 and strict["overall_recall"] == 0.0


def test_conll_no_entity_predicted_scores_zero_without_warnings():
    references = [["B-PER", "I-PER", "O"], ["B-LOC", "O"]]
    predictions = [["O"] * 3, ["O"] * 2]
    result = _no_warnings(load_metric("conll_ner").compute, predictions=predictions, references=references)
    assert (result["overall_precision"], result["overall_recall"], result["overall_f1"]) == (0.0, 0.0, 0.0)
    assert result["PER"]["f1"] == 0.0 and result["LOC"]["number"] == 1
    # Nothing to find and nothing found: every entity score is 0/0, reported as 0; accuracy is 1.
    nothing = _no_warnings(load_metric("conll_ner").compute, predictions=predictions, references=predictions)
    assert nothing == {"overall_precision": 0.0, "overall_recall": 0.0, "overall_f1": 0.0, "overall_accuracy": 1.0}


def test_conll_single_example():
    result = _no_warnings(load_metric("conll_ner").compute, predictions=[["B-MISC"]], references=[["B-MISC"]])
    assert result["MISC"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 1}


def test_conll_empty_and_misaligned_input_are_clear_errors():
    with pytest.raises(ValueError, match="at least one sentence"):
        load_metric("conll_ner").compute(predictions=[], references=[])
    with pytest.raises(ValueError, match="sentence 1 has 1 predicted tags but 2 reference tags"):
        load_metric("conll_ner").compute(predictions=[["O"], ["O"]], references=[["O"], ["O", "O"]])
    with pytest.raises(ValueError, match="unknown tagging scheme"):
        load_metric("conll_ner").compute(predictions=[["O"]], references=[["O"]], mode="strict", scheme="BIO")


def test_conll_matches_seqeval_and_entity_counts_on_random_tags():
    rng = random.Random(3)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    references = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    predictions = _perturb(references, seed=4)
    result = load_metric("conll_ner").compute(predictions=predictions, references=references)
    _assert_same_scores(result, _counted_scores(predictions, references))
    _assert_same_scores(result, _seqeval_scores(predictions, references))


def test_conll_on_real_conll2003_validation():
    references = _read_conll(_shared_file("conll2003/validation.txt"))
    assert len(references) == 3250
    predictions = _perturb(references, seed=2003)
    metric = load_metric("conll_ner")
    for start in range(0, len(references), 500):  # as an evaluation loop would, batch by batch
        metric.add_batch(predictions=predictions[start : start + 500], references=references[start : start + 500])
    result = metric.compute()
    assert set(result) >= {"PER", "ORG", "LOC", "MISC"}
    _assert_same_scores(result, _counted_scores(predictions, references))
    _assert_same_scores(result, _seqeval_scores(predictions, references))
    assert 0.3 < result["overall_f1"] < 0.95 and result["overall_accuracy"] > 0.9
    assert load_metric("conll_ner").compute(predictions=references, references=references)["overall_f1"] == 1.0


# --- GLUE score ---------------------------------------------------------------------------------------------

# BERT-base on the GLUE test sets as its leaderboard entry reports it (two numbers where GLUE has two
# metrics; MobileBERT's Table 4 shows the first of each and the score, 78.3).
BERT_BASE_GLUE_TEST = {
    "cola": {"matthews_correlation": 0.521},
    "sst2": {"accuracy": 0.935},
    "mrpc": {"f1": 0.889, "accuracy": 0.848},
    "stsb": {"pearson": 0.871, "spearmanr": 0.858},
    "qqp": {"f1": 0.712, "accuracy": 0.892},
    "mnli_matched": {"accuracy": 0.846},
    "mnli_mismatched": {"accuracy": 0.834},
    "qnli": {"accuracy": 0.905},
    "rte": {"accuracy": 0.664},
    "wnli": {"accuracy": 0.651},
}


def test_glue_score_reproduces_bert_base_leaderboard_score():
    assert round(100 * glue_score(BERT_BASE_GLUE_TEST), 1) == 78.3
    scores = glue_task_scores(BERT_BASE_GLUE_TEST)
    assert len(scores) == 9 and scores["mnli"] == pytest.approx(0.84)
    assert scores["mrpc"] == pytest.approx((0.889 + 0.848) / 2)
    assert scores["stsb"] == pytest.approx((0.871 + 0.858) / 2)


def test_glue_score_of_the_glue_metric_outputs():
    results, expected = {}, []
    for task in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "mnli_mismatched", "qnli", "rte"):
        predictions, labels = _random_task_data(task, size=120, seed=len(results))
        results[task] = load_metric("glue", task).compute(predictions=predictions, references=labels)
        reference = _references_for(task)(predictions, labels)
        expected.append((task, sum(reference.values()) / len(reference)))
    mnli = [score for task, score in expected if task.startswith("mnli")]
    by_task = [score for task, score in expected if not task.startswith("mnli")] + [sum(mnli) / 2]
    assert glue_score(results) == pytest.approx(sum(by_task) / len(by_task), abs=1e-12)


def test_glue_score_with_one_metric_per_task_as_papers_report():
    results = {"mrpc": {"f1": 0.9, "accuracy": 0.8}, "stsb": {"pearson": 0.88, "spearmanr": 0.86}}
    assert glue_score(results) == pytest.approx((0.85 + 0.87) / 2)
    assert glue_score(results, main_metrics={"mrpc": ["f1"], "stsb": ["spearmanr"]}) == pytest.approx(0.88)


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ({}, "no GLUE results"),
        ({"ax": {"accuracy": 0.5}}, "diagnostic"),
        ({"squad": {"f1": 0.5}}, "unknown GLUE task 'squad'"),
        ({"mrpc": {"accuracy": 0.5}}, "lack f1"),
        ({"mnli": {"accuracy": 0.8}, "mnli_matched": {"accuracy": 0.8}}, "given twice"),
    ],
)
def test_glue_score_errors_name_the_problem(results, message):
    with pytest.raises(ValueError, match=message):
        glue_score(results)
