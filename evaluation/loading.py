"""Where the evaluate metric scripts shipped with compact-bert live, and how to load them offline."""

from __future__ import annotations

from pathlib import Path

__all__ = ["METRIC_NAMES", "load_metric", "metric_path"]

# One folder per metric under metrics/, holding <name>/<name>.py: the layout `evaluate.load(folder)` expects.
METRIC_NAMES = ("glue", "conll_ner")
_METRICS_DIR = Path(__file__).resolve().parent / "metrics"


def metric_path(name: str) -> str:
    """The folder of metric ``name`` inside the installed package, ready for ``evaluate.load``.

    The path is computed from this module's location, so it points into site-packages for a wheel install and
    into the checkout for an editable one. It is a ``str`` because ``evaluate.load`` does not accept
    ``os.PathLike``.
    """
    if name not in METRIC_NAMES:
        raise ValueError(f"unknown metric {name!r}: compact-bert ships {', '.join(METRIC_NAMES)}")
    return str(_METRICS_DIR / name)


def load_metric(name: str, config_name: str | None = None, **kwargs):
    """``evaluate.load`` of a shipped metric by path, so that nothing is fetched from the Hub.

    ``config_name`` picks the task of the ``glue`` metric (``"sst2"``, ``"mrpc"``, ...); ``kwargs`` go to
    ``evaluate.load`` (``experiment_id``, ``num_process``, ``process_id``, ``keep_in_memory``, ...).
    """
    import evaluate  # deferred: importing evaluate pulls in datasets, which metric_path does not need

    return evaluate.load(metric_path(name), config_name, **kwargs)
