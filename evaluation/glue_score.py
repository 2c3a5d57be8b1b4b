"""The GLUE score: the macro-average over tasks of each task's main score (Wang et al., 2018).

GLUE's convention, which the benchmark's leaderboard applies: a task with two metrics scores their unweighted
mean (MRPC and QQP: F1 and accuracy; STS-B: Pearson and Spearman correlation), CoLA scores its Matthews
correlation, the other tasks their accuracy; MNLI is one task scoring the mean of its matched and mismatched
accuracies; the diagnostic set AX is not part of the score. With BERT-base's published test results this gives
its leaderboard score of 78.3. Papers that report one metric per task (e.g. MiniMoE: F1 for MRPC and QQP,
Spearman for STS-B) are reproduced by passing ``main_metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["GLUE_MAIN_METRICS", "glue_score", "glue_task_scores"]

# Result keys of the `glue` metric that make up each task's score (GLUE's convention).
GLUE_MAIN_METRICS: dict[str, tuple[str, ...]] = {
    "cola": ("matthews_correlation",),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "stsb": ("pearson", "spearmanr"),
    "qqp": ("f1", "accuracy"),
    "mnli": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
}
# Names of the `glue` metric's MNLI configurations: "mnli" evaluates the matched split, as "mnli_matched" does.
_MNLI_SPLITS = {"mnli": "matched", "mnli_matched": "matched", "mnli_mismatched": "mismatched"}


def _task_score(task: str, metrics: Mapping[str, float], keys: Sequence[str]) -> float:
    missing = [key for key in keys if key not in metrics]
    if missing:
        raise ValueError(
            f"the results of GLUE task {task!r} lack {', '.join(missing)} (they have "
            f"{', '.join(metrics) or 'nothing'}): pass the dict that the `glue` metric returned for that task"
        )
    return math.fsum(float(metrics[key]) for key in keys) / len(keys)


def glue_task_scores(
    results: Mapping[str, Mapping[str, float]], main_metrics: Mapping[str, Sequence[str]] | None = None
) -> dict[str, float]:
    """Each task's score, keyed by task; the MNLI configurations are merged into one ``"mnli"`` entry.

    Args:
        results: ``{task: metrics}`` with ``task`` a config name of the ``glue`` metric (``"sst2"``, ``"mrpc"``,
            ``"mnli_matched"``, ...) and ``metrics`` the dict it returned for that task.
        main_metrics: ``{task: metric keys}`` replacing GLUE's convention for the tasks it names, e.g.
            ``{"mrpc": ["f1"], "stsb": ["spearmanr"]}``.
    """
    if not results:
        raise ValueError("no GLUE results given: pass {task: metrics returned by the glue metric for it}")
    chosen = {**GLUE_MAIN_METRICS, **{task: tuple(keys) for task, keys in (main_metrics or {}).items()}}
    unknown = sorted(set(chosen) - set(GLUE_MAIN_METRICS))
    if unknown:
        raise ValueError(f"main_metrics names unknown GLUE tasks {unknown}: use {', '.join(GLUE_MAIN_METRICS)}")
    if any(not keys for keys in chosen.values()):
        raise ValueError("main_metrics must give at least one metric key per task it names")

    scores: dict[str, float] = {}
    mnli: dict[str, tuple[str, float]] = {}
    for task, metrics in results.items():
        if task == "ax":
            raise ValueError(
                "'ax' is GLUE's diagnostic set, which the GLUE score leaves out: remove it from the results"
            )
        if task in _MNLI_SPLITS:
            split = _MNLI_SPLITS[task]
            if split in mnli:
                raise ValueError(
                    f"MNLI {split} is given twice, as {mnli[split][0]!r} and {task!r} ('mnli' is the matched split)"
                )
            mnli[split] = (task, _task_score(task, metrics, chosen["mnli"]))
        elif task in GLUE_MAIN_METRICS:
            scores[task] = _task_score(task, metrics, chosen[task])
        else:
            known = ", ".join([*GLUE_MAIN_METRICS, "mnli_matched", "mnli_mismatched"])
            raise ValueError(f"unknown GLUE task {task!r}: the GLUE score averages {known}")
    if mnli:
        scores["mnli"] = math.fsum(score for _, score in mnli.values()) / len(mnli)
    return scores


def glue_score(
    results: Mapping[str, Mapping[str, float]], main_metrics: Mapping[str, Sequence[str]] | None = None
) -> float:
    """The GLUE score of ``results`` (``{task: glue metric output}``): the mean of ``glue_task_scores``.

    It averages the tasks that are given, so a subset (as many papers report, e.g. without WNLI) scores the
    mean over that subset. The scale is that of the inputs: fractions from the ``glue`` metric; GLUE reports
    them multiplied by 100.
    """
    scores = glue_task_scores(results, main_metrics)
    return math.fsum(scores.values()) / len(scores)
