"""GLUE metric for Hugging Face `evaluate`, computed offline with scikit-learn and SciPy.

Load it by path (no Hub access): ``evaluate.load(compact_bert.evaluation.metric_path("glue"), "mrpc")``, or
``compact_bert.evaluation.load_metric("glue", "mrpc")``. The configuration names and the result keys are those
of evaluate's Hub metric ``glue``, so code written against that metric works unchanged; unlike it, this one
ships inside compact-bert, keeps STS-B scores in float64 and rejects empty input.

This file is an evaluate metric script: evaluate copies it into its module cache and imports it on its own,
so it imports nothing from compact-bert. Evaluate's dependency scan reads only unindented ``import`` lines;
scikit-learn and SciPy are imported inside ``try`` so that a missing one names the extra that provides it.
"""

import warnings

import datasets
import evaluate

try:
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
except ImportError as error:  # the metrics extra is not installed
    raise ImportError(
        "The GLUE metric of compact-bert needs scikit-learn and SciPy: pip install 'compact-bert[metrics]'"
    ) from error


_CITATION = """\
@inproceedings{wang2018glue,
  title = {{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author = {Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
  booktitle = {Proceedings of the 2018 EMNLP Workshop BlackboxNLP: Analyzing and Interpreting Neural Networks for NLP},
  pages = {353--355},
  year = {2018},
  url = {https://aclanthology.org/W18-5446},
}
"""

_DESCRIPTION = """\
Scores of the GLUE benchmark (Wang et al., 2018), one task per configuration name: accuracy for SST-2, MNLI
(matched and mismatched), QNLI, RTE, WNLI and the AX diagnostic set; F1 of the positive class and accuracy for
MRPC and QQP; Matthews correlation for CoLA; Pearson and Spearman correlation for STS-B. Scores are fractions
in [0, 1] (correlations in [-1, 1]); GLUE reports them multiplied by 100.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: predicted labels (class ids; for STS-B, real-valued similarity scores).
    references: gold labels, in the same format as the predictions.
Returns: a dict with
    "accuracy" for every task except CoLA and STS-B (MRPC and QQP add "f1", the F1 score of class 1);
    "matthews_correlation" for CoLA; "pearson" and "spearmanr" for STS-B.
Examples:
    >>> glue = evaluate.load(compact_bert.evaluation.metric_path("glue"), "mrpc")
    >>> glue.compute(predictions=[0, 1, 1, 0], references=[0, 1, 0, 0])
    {'accuracy': 0.75, 'f1': 0.6666666666666666}
"""

_ACCURACY_TASKS = ("sst2", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli", "ax")
_F1_TASKS = ("mrpc", "qqp")
TASKS = ("cola", "stsb", *_F1_TASKS, *_ACCURACY_TASKS)


def _check_lengths(predictions, references, minimum=1):
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references differ in length: {len(predictions)} predictions, {len(references)} references"
        )
    if len(predictions) < minimum:
        raise ValueError(
            f"the GLUE metric needs at least {minimum} example(s), got {len(predictions)}: "
            "pass predictions and references to compute() or add_batch()"
        )


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Glue(evaluate.Metric):
    def _info(self):
        if self.config_name not in TASKS:
            raise ValueError(
                f"unknown GLUE task {self.config_name!r} (the config name picks the task): pass one of "
                f"{', '.join(TASKS)} as the config name, e.g. evaluate.load(path, 'sst2')"
            )
        label_type = "float64" if self.config_name == "stsb" else "int64"
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value(label_type), "references": datasets.Value(label_type)}
            ),
            codebase_urls=["https://github.com/nyu-mll/GLUE-baselines"],
            reference_urls=["https://gluebenchmark.com/", "https://arxiv.org/abs/1804.07461"],
            # Python lists, not format="numpy": datasets' NumPy formatter casts floats to float32, which would
            # move STS-B correlations by ~1e-7 from those of the model's own predictions.
        )

    def _compute(self, predictions, references):
        task = self.config_name
        if task == "stsb":
            # A correlation needs two points; SciPy would raise a less helpful error on one.
            _check_lengths(predictions, references, minimum=2)
            return {
                "pearson": float(pearsonr(references, predictions)[0]),
                "spearmanr": float(spearmanr(references, predictions)[0]),
            }
        _check_lengths(predictions, references)
        if task == "cola":
            with warnings.catch_warnings():
                # With one class in references and predictions the MCC is 0/0, which scikit-learn (and GLUE)
                # report as 0; its warning about the confusion-matrix shape says nothing about this metric.
                warnings.filterwarnings("ignore", message="A single label was found", category=UserWarning)
                matthews = matthews_corrcoef(references, predictions)
            return {"matthews_correlation": float(matthews)}
        result = {"accuracy": float(accuracy_score(references, predictions))}
        if task in _F1_TASKS:
            # zero_division=0: a model that never predicts the positive class scores F1 0, without a warning.
            result["f1"] = float(f1_score(references, predictions, pos_label=1, zero_division=0))
        return result
