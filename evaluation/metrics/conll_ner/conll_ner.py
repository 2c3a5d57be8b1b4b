"""CoNLL entity-level metric (precision, recall, F1 per entity type and overall) for Hugging Face `evaluate`.

Load it by path (no Hub access): ``evaluate.load(compact_bert.evaluation.metric_path("conll_ner"))``, or
``compact_bert.evaluation.load_metric("conll_ner")``. Inputs and result keys are those of evaluate's Hub metric
``seqeval``, so code written against that metric works unchanged.

Why seqeval computes the scores rather than code of our own: the CoNLL number everyone reports is the one of
the shared task's ``conlleval`` script, whose chunking rules have corner cases (an ``I-`` tag after ``O`` or
after another type opens an entity; ``B-X I-Y`` is two entities). seqeval's default mode reproduces
``conlleval`` and is what published BERT-family results (and evaluate's own metric) use, so a score from this
module can be compared with theirs. A second implementation here could only drift from that reference; the
tests instead check this module against an independent entity counter and hand-counted cases.

Differences from evaluate's ``seqeval``: ``zero_division`` defaults to 0 (a model that predicts no entity
scores precision and F1 0 without a warning), a corpus without any entity scores 0 instead of emitting NumPy
warnings, and empty input or sentences whose tag counts differ raise a ``ValueError`` that says where.

This file is an evaluate metric script: evaluate copies it into its module cache and imports it on its own,
so it imports nothing from compact-bert. Evaluate's dependency scan reads only unindented ``import`` lines;
seqeval is imported inside ``try`` so that its absence names the extra that provides it.
"""

import warnings

import datasets
import evaluate

try:
    import seqeval.scheme
    from seqeval.metrics import accuracy_score, classification_report
except ImportError as error:  # the metrics extra is not installed
    raise ImportError(
        "The CoNLL entity-level metric of compact-bert needs seqeval: pip install 'compact-bert[metrics]'"
    ) from error


_CITATION = """\
@inproceedings{tjong-kim-sang-de-meulder-2003-introduction,
  title = {Introduction to the {CoNLL}-2003 Shared Task: Language-Independent Named Entity Recognition},
  author = {Tjong Kim Sang, Erik F. and De Meulder, Fien},
  booktitle = {Proceedings of the Seventh Conference on Natural Language Learning at {HLT-NAACL} 2003},
  pages = {142--147},
  year = {2003},
  url = {https://aclanthology.org/W03-0419},
}
@misc{seqeval,
  title = {{seqeval}: A Python framework for sequence labeling evaluation},
  author = {Hiroki Nakayama},
  year = {2018},
  url = {https://github.com/chakki-works/seqeval},
  note = {Software available from https://github.com/chakki-works/seqeval},
}
"""

_DESCRIPTION = """\
Entity-level scores of sequence labelling as defined by the CoNLL shared tasks (Tjong Kim Sang & De Meulder,
2003) and computed by seqeval (Nakayama, 2018): an entity counts as correct only if its type and its exact
span match a gold entity. Reports precision, recall and F1 per entity type and micro-averaged over all
entities, plus token-level accuracy. Tags follow BIO / IOB2 (``B-PER``, ``I-PER``, ``O``); in the default mode
chunks are read as the ``conlleval`` script reads them, so an ``I-`` tag without a preceding ``B-`` starts an
entity. ``mode="strict"`` with a ``scheme`` applies the scheme's rules instead.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of sentences, each a list of predicted tags (str).
    references: list of sentences, each a list of gold tags (str), as long as the prediction.
    suffix: True when the type comes first (``PER-B``); default False.
    scheme: tagging scheme name for strict mode: "IOB1", "IOB2", "IOE1", "IOE2", "IOBES" or "BILOU".
    mode: None (default, conlleval rules) or "strict".
    sample_weight: optional weight per sentence.
    zero_division: value of a precision / recall whose denominator is 0: 0 (default), 1 or "warn".
Returns: a dict with, for each entity type, {"precision", "recall", "f1", "number"} ("number": gold entities
    of that type), and "overall_precision", "overall_recall", "overall_f1" (micro-averaged over entities) and
    "overall_accuracy" (over tokens).
Examples:
    >>> conll = evaluate.load(compact_bert.evaluation.metric_path("conll_ner"))
    >>> conll.compute(predictions=[["B-PER", "I-PER", "O"]], references=[["B-PER", "I-PER", "O"]])
    {'PER': {'precision': 1.0, 'recall': 1.0, 'f1': 1.0, 'number': 1}, 'overall_precision': 1.0, \
'overall_recall': 1.0, 'overall_f1': 1.0, 'overall_accuracy': 1.0}
"""

SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
_AVERAGES = ("micro avg", "macro avg", "weighted avg")


def _check_inputs(predictions, references):
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references differ in length: {len(predictions)} predicted sentences, "
            f"{len(references)} reference sentences"
        )
    if len(predictions) == 0:
        raise ValueError(
            "the CoNLL metric needs at least one sentence, got none: pass predictions and references to "
            "compute() or add_batch()"
        )
    for index, (predicted, gold) in enumerate(zip(predictions, references)):
        if len(predicted) != len(gold):
            raise ValueError(
                f"sentence {index} has {len(predicted)} predicted tags but {len(gold)} reference tags: "
                "predictions must be aligned with the references token by token"
            )


def _scheme_class(scheme):
    if scheme is None:
        return None
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tagging scheme {scheme!r}: pass one of {', '.join(SCHEMES)} or None")
    return getattr(seqeval.scheme, scheme)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ConllNer(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("string", id="label"), id="sequence"),
                    "references": datasets.Sequence(datasets.Value("string", id="label"), id="sequence"),
                }
            ),
            codebase_urls=["https://github.com/chakki-works/seqeval"],
            reference_urls=[
                "https://www.clips.uantwerpen.be/conll2003/ner/",
                "https://www.clips.uantwerpen.be/conll2000/chunking/conlleval.txt",
            ],
        )

    def _compute(
        self, predictions, references, suffix=False, scheme=None, mode=None, sample_weight=None, zero_division=0
    ):
        _check_inputs(predictions, references)
        if mode not in (None, "strict"):
            raise ValueError(f"unknown mode {mode!r}: pass None (conlleval rules) or 'strict'")
        with warnings.catch_warnings():
            # seqeval also averages over entity types (macro / weighted), which is NaN with a NumPy warning when
            # no entity occurs at all; those averages are not reported here.
            warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
            warnings.filterwarnings("ignore", message="invalid value encountered", category=RuntimeWarning)
            report = classification_report(
                y_true=references,
                y_pred=predictions,
                suffix=suffix,
                output_dict=True,
                mode=mode,
                scheme=_scheme_class(scheme),
                sample_weight=sample_weight,
                zero_division=zero_division,
            )
        overall = report["micro avg"]
        scores = {
            entity_type: {
                "precision": float(score["precision"]),
                "recall": float(score["recall"]),
                "f1": float(score["f1-score"]),
                "number": int(score["support"]),
            }
            for entity_type, score in report.items()
            if entity_type not in _AVERAGES
        }
        scores["overall_precision"] = float(overall["precision"])
        scores["overall_recall"] = float(overall["recall"])
        scores["overall_f1"] = float(overall["f1-score"])
        scores["overall_accuracy"] = float(accuracy_score(y_true=references, y_pred=predictions))
        return scores
