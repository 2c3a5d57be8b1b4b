"""Evaluation for compact-bert models: evaluate metric scripts shipped in the package, loadable offline.

``load_metric("glue", "sst2")`` and ``load_metric("conll_ner")`` return ``evaluate`` metrics (``add_batch``,
``compute``) read from this package rather than the Hub; ``metric_path(name)`` gives the folder to pass to
``evaluate.load`` directly. ``glue_score`` turns the ``glue`` metric's per-task results into the GLUE score.
The metrics need the ``metrics`` extra: ``pip install 'compact-bert[metrics]'``.
"""

from __future__ import annotations

from .glue_score import GLUE_MAIN_METRICS, glue_score, glue_task_scores
from .loading import METRIC_NAMES, load_metric, metric_path

__all__ = ["GLUE_MAIN_METRICS", "METRIC_NAMES", "glue_score", "glue_task_scores", "load_metric", "metric_path"]
