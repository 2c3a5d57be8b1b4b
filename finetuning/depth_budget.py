"""Depth by latency budget: the deepest student that runs within ``max_latency_ratio`` of its teacher, here.

A user who needs "half the teacher's latency" should not have to know that, on this CPU, 3 of 6 layers is 0.51× and
4 is 0.67× (the embeddings, the classifier and the per-call overhead do not shrink with depth). So ``compact-bert
finetune --max_latency_ratio R`` (with a preset student and a teacher) and the main job (``distill task``) measure
instead of assuming: the teacher and the student at every depth below the teacher's, built from their configs (the
latency of a forward pass does not depend on the values of the weights), run interleaved at batch 1 × 128 on the
same inference path — compact-bert's eager path after ``optimize_for_inference``, the teacher converted to a MiniLM
of its own shape as the main job's comparison does — and the deepest student within ``R`` of the teacher's median
is chosen. Every layer of a student costs the same, so its latency is ``a + b · depth``: the choice reads the
least-squares line through the depths' medians, not each median alone, so that one round disturbed by another
process on a shared machine cannot make a deeper student look faster than a shallower one. The measurements, the
line and the reason are printed and returned for the run summary.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

__all__ = [
    "DepthChoice",
    "LATENCY_BUDGET_ROUNDS",
    "budgeted_overrides",
    "check_max_latency_ratio",
    "deepest_student_within_budget",
]

LATENCY_BUDGET_ROUNDS = 15
SEQUENCE_LENGTH = 128


@dataclass
class DepthChoice:
    """The chosen depth, the latency ratio of every depth measured, and the sentence that says why."""

    num_hidden_layers: int
    max_latency_ratio: float
    teacher_ms: float
    ratios: dict[int, float] = field(default_factory=dict)  # read off the fitted line
    measured_ms: dict[int, float] = field(default_factory=dict)  # the medians the line was fitted to
    reason: str = ""

    def as_record(self) -> dict:
        return {
            "num_hidden_layers": self.num_hidden_layers,
            "max_latency_ratio": self.max_latency_ratio,
            "teacher_ms": self.teacher_ms,
            "latency_ratio_by_depth": {str(depth): ratio for depth, ratio in self.ratios.items()},
            "measured_ms_by_depth": {str(depth): ms for depth, ms in self.measured_ms.items()},
            "reason": self.reason,
        }


def check_max_latency_ratio(max_latency_ratio: float) -> None:
    """``--max_latency_ratio`` must be a share of the teacher's latency in (0, 1]."""
    if not 0 < max_latency_ratio <= 1:
        raise ValueError(
            f"--max_latency_ratio must be in (0, 1] (the student's latency over the teacher's), got "
            f"{max_latency_ratio}."
        )


def _line(medians: dict[int, float]) -> tuple[float, float]:
    """Least-squares ``a + b · depth`` through the medians (one depth: no slope to fit, the median itself), with
    ``b >= 0``: a layer never costs less than nothing, and a machine busy enough to tilt the medians the other way
    gets every depth at their mean instead of deeper students that look cheaper."""
    depths = list(medians)
    if len(depths) == 1:
        return 0.0, medians[depths[0]] / depths[0]
    mean_depth = sum(depths) / len(depths)
    mean_ms = sum(medians.values()) / len(depths)
    slope = sum((depth - mean_depth) * (medians[depth] - mean_ms) for depth in depths) / sum(
        (depth - mean_depth) ** 2 for depth in depths
    )
    slope = max(slope, 0.0)
    return mean_ms - slope * mean_depth, slope


def deepest_student_within_budget(
    student_config, teacher_config, max_latency_ratio: float, rounds: int = LATENCY_BUDGET_ROUNDS
) -> DepthChoice:
    """The deepest ``student_config`` (1 layer up to one fewer than the teacher's) whose latency is at most
    ``max_latency_ratio`` × the teacher's (module docstring). Raises ``ValueError`` when not even one layer fits,
    naming the ratio it measured."""
    import torch
    import transformers

    from ..configuration.dense_students import dense_student_config
    from ..configuration.presets import minilm_fields_like
    from ..evaluation.runtime_latency import eager_runner, latency_inputs, measure_interleaved

    check_max_latency_ratio(max_latency_ratio)
    teacher_layers = teacher_config.num_hidden_layers
    if teacher_layers < 2:
        raise ValueError(f"The teacher has {teacher_layers} layer: there is no shallower student to choose.")
    configs = {"teacher": dense_student_config(minilm_fields_like(teacher_config, teacher_layers), teacher_config)}
    for depth in range(1, teacher_layers):
        config = copy.deepcopy(student_config)
        config.num_hidden_layers = depth
        configs[depth] = config
    length = min(SEQUENCE_LENGTH, *(config.max_position_embeddings for config in configs.values()))
    inputs = latency_inputs(min(config.vocab_size for config in configs.values()), 1, length)
    with torch.random.fork_rng():  # random weights for timing only: the run's seeded stream is left as it was
        torch.manual_seed(0)
        runners = {
            name: eager_runner(transformers.AutoModelForSequenceClassification.from_config(config), inputs, True)
            for name, config in configs.items()
        }
    measured = measure_interleaved(runners, rounds=rounds)
    teacher_ms = measured.pop("teacher").median_ms
    fixed_ms, per_layer_ms = _line({depth: result.median_ms for depth, result in measured.items()})
    ratios = {depth: round((fixed_ms + per_layer_ms * depth) / teacher_ms, 3) for depth in measured}
    fitting = [depth for depth, ratio in ratios.items() if ratio <= max_latency_ratio]
    table = ", ".join(f"{depth} layers {ratio:.2f}x" for depth, ratio in ratios.items())
    if not fitting:
        raise ValueError(
            f"--max_latency_ratio {max_latency_ratio}: no student depth fits; measured against the teacher "
            f"({teacher_ms:.1f} ms at batch 1 x {length}): {table}. Give a larger ratio or a narrower preset."
        )
    depth = max(fitting)
    deeper = f"; {depth + 1} layers would be {ratios[depth + 1]:.2f}x" if depth + 1 in ratios else ""
    reason = (
        f"{depth} layers: the deepest student within {max_latency_ratio}x of the teacher's latency on this machine "
        f"({ratios[depth]:.2f}x{deeper}; teacher {teacher_ms:.1f} ms, student {fixed_ms:.1f} + {per_layer_ms:.1f} ms "
        f"per layer, batch 1 x {length}, compact-bert's eager path; every depth: {table})."
    )
    medians = {depth: round(result.median_ms, 2) for depth, result in measured.items()}
    return DepthChoice(depth, max_latency_ratio, round(teacher_ms, 2), ratios, medians, reason)


def budgeted_overrides(
    student_config, teacher: str, max_latency_ratio: float, overrides: dict, overrides_flag: str
) -> tuple[dict, dict]:
    """What ``--max_latency_ratio`` does on ``finetune`` and ``distill task``: the student's config ``overrides``
    (the JSON object of ``--<overrides_flag>``) with the depth chosen against ``teacher`` (a folder or the packaged
    name), printed with its reason, and the record of the choice. ``ValueError`` names the flag to change."""
    from transformers import AutoConfig

    from ..distillation.teachers import resolve_model_path

    if "num_hidden_layers" in overrides:
        raise ValueError(
            f"--max_latency_ratio chooses num_hidden_layers: drop it from --{overrides_flag}, or drop the budget."
        )
    try:
        teacher_config = AutoConfig.from_pretrained(resolve_model_path(teacher))
    except (OSError, ValueError) as error:
        raise ValueError(f"--max_latency_ratio: the teacher {teacher!r} cannot be read: {error}") from None
    choice = deepest_student_within_budget(student_config, teacher_config, max_latency_ratio)
    print(f"Depth by latency budget: {choice.reason}")
    return {**overrides, "num_hidden_layers": choice.num_hidden_layers}, choice.as_record()
