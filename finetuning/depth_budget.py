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

Below half the teacher's depth, depth is worth more than width: at 0.3x of the packaged teacher, 3 layers of 256
channels kept more of the teacher on sentences, pairs and tags than 2 or 1 full-width layers
(``examples/tiny_students.py``). So a dense preset is also timed in that narrowed shape (``narrowed_shape``), which
is chosen where no whole student half the teacher's depth fits.
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
    """The chosen depth (and narrower width, where the tiny-student shape was chosen), the latency ratio of every
    shape measured, and the sentence that says why."""

    num_hidden_layers: int
    max_latency_ratio: float
    teacher_ms: float
    ratios: dict[int, float] = field(default_factory=dict)  # read off the fitted line
    measured_ms: dict[int, float] = field(default_factory=dict)  # the medians the line was fitted to
    reason: str = ""
    narrowed: dict | None = None  # the narrowed shape's width fields when it was chosen; None: the preset's width
    narrowed_ratio: float | None = None  # the narrowed shape's measured ratio (None: not measured)

    def overrides(self) -> dict:
        """The config fields the choice sets."""
        return {"num_hidden_layers": self.num_hidden_layers, **(self.narrowed or {})}

    def as_record(self) -> dict:
        return {
            "num_hidden_layers": self.num_hidden_layers,
            "narrowed": self.narrowed,
            "max_latency_ratio": self.max_latency_ratio,
            "teacher_ms": self.teacher_ms,
            "latency_ratio_by_depth": {str(depth): ratio for depth, ratio in self.ratios.items()},
            "narrowed_latency_ratio": self.narrowed_ratio,
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


def _layers(count: int) -> str:
    return f"{count} layer" if count == 1 else f"{count} layers"


def narrowed_shape(student_config) -> dict:
    """The tiny-student shape's width (examples/tiny_students.py): two thirds of the residual stream, rounded down to
    whole heads of the same size, and half of each FFN — the student's most important channels, heads and neurons
    when it starts from its teacher. For the main job's 384-wide preset: 256 channels, 8 heads, 768 FFN neurons."""
    head_size = student_config.hidden_size // student_config.num_attention_heads
    heads = max(1, (2 * student_config.num_attention_heads) // 3)
    return {
        "hidden_size": heads * head_size,
        "num_attention_heads": heads,
        "intermediate_size": max(1, student_config.intermediate_size // 2),
    }


def deepest_student_within_budget(
    student_config,
    teacher_config,
    max_latency_ratio: float,
    rounds: int = LATENCY_BUDGET_ROUNDS,
    narrow: bool = False,
) -> DepthChoice:
    """The deepest ``student_config`` (1 layer up to one fewer than the teacher's) whose latency is at most
    ``max_latency_ratio`` × the teacher's (module docstring). With ``narrow``, the tiny-student shape is measured too:
    half the teacher's depth (rounded up) at the ``narrowed_shape`` width. Where no whole student that deep fits, it
    is chosen if it fits — at 0.3x of the packaged teacher, 3 layers of 256 channels kept 95.5 / 95.2 / 92.6% of the
    teacher on SST-2 / STS-B / CoNLL-2003 where 2 whole-width layers with half their FFNs kept 95.6 / 91.2 / 91.4%
    (examples/tiny_students.py, docs/students.md). Raises ``ValueError`` when nothing fits, naming the ratios."""
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
    kept_depth = (teacher_layers + 1) // 2
    width = narrowed_shape(student_config)
    if narrow:
        configs["narrowed"] = copy.deepcopy(student_config)
        for name, value in {**width, "num_hidden_layers": kept_depth}.items():
            setattr(configs["narrowed"], name, value)
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
    narrowed_ratio = round(measured.pop("narrowed").median_ms / teacher_ms, 3) if narrow else None
    fixed_ms, per_layer_ms = _line({depth: result.median_ms for depth, result in measured.items()})
    ratios = {depth: round((fixed_ms + per_layer_ms * depth) / teacher_ms, 3) for depth in measured}
    fitting = [depth for depth, ratio in ratios.items() if ratio <= max_latency_ratio]
    table = ", ".join(f"{_layers(depth)} {ratio:.2f}x" for depth, ratio in ratios.items())
    shape = (
        f"{kept_depth} layers of {width['hidden_size']} channels, {width['num_attention_heads']} heads and "
        f"{width['intermediate_size']} FFN neurons"
    )
    if narrow:
        table += f"; {shape} {narrowed_ratio:.2f}x"
    take_narrowed = narrow and narrowed_ratio <= max_latency_ratio and max(fitting, default=0) < kept_depth
    if not fitting and not take_narrowed:
        raise ValueError(
            f"--max_latency_ratio {max_latency_ratio}: no student depth fits; measured against the teacher "
            f"({teacher_ms:.1f} ms at batch 1 x {length}): {table}. Give a larger ratio or a narrower preset."
        )
    context = f"teacher {teacher_ms:.1f} ms, batch 1 x {length}, compact-bert's eager path; every shape: {table}."
    medians = {depth: round(result.median_ms, 2) for depth, result in measured.items()}
    if take_narrowed:
        deepest = f"{max(fitting)} whole layer{'s' if max(fitting) > 1 else ''}" if fitting else "not one whole layer"
        reason = (
            f"{shape}: {kept_depth} whole layers do not fit within {max_latency_ratio}x of the teacher's latency on "
            f"this machine, {deepest} would; narrower at that depth keeps more of the teacher ({narrowed_ratio:.2f}x; "
            f"{context}"
        )
        return DepthChoice(
            kept_depth, max_latency_ratio, round(teacher_ms, 2), ratios, medians, reason, width, narrowed_ratio
        )
    depth = max(fitting)
    deeper = f"; {_layers(depth + 1)} would be {ratios[depth + 1]:.2f}x" if depth + 1 in ratios else ""
    reason = (
        f"{_layers(depth)}: the deepest student within {max_latency_ratio}x of the teacher's latency on this machine "
        f"({ratios[depth]:.2f}x{deeper}; {context}"
    )
    return DepthChoice(depth, max_latency_ratio, round(teacher_ms, 2), ratios, medians, reason, None, narrowed_ratio)


def budgeted_overrides(
    student_config, teacher: str, max_latency_ratio: float, overrides: dict, overrides_flag: str
) -> tuple[dict, dict]:
    """What ``--max_latency_ratio`` does on ``finetune`` and ``distill task``: the student's config ``overrides``
    (the JSON object of ``--<overrides_flag>``) with the depth chosen against ``teacher`` (a folder or the packaged
    name) — or, for a dense student whose width the overrides leave open, the narrower tiny-student shape where no
    whole student half the teacher's depth fits — printed with its reason, and the record of the choice.
    ``ValueError`` names the flag to change."""
    from transformers import AutoConfig

    from ..configuration.dense_students import is_dense_student
    from ..distillation.teachers import resolve_model_path

    if "num_hidden_layers" in overrides:
        raise ValueError(
            f"--max_latency_ratio chooses num_hidden_layers: drop it from --{overrides_flag}, or drop the budget."
        )
    try:
        teacher_config = AutoConfig.from_pretrained(resolve_model_path(teacher))
    except (OSError, ValueError) as error:
        raise ValueError(f"--max_latency_ratio: the teacher {teacher!r} cannot be read: {error}") from None
    width_fields = ("hidden_size", "num_attention_heads", "intermediate_size")
    narrow = is_dense_student(student_config) and not any(name in overrides for name in width_fields)
    choice = deepest_student_within_budget(student_config, teacher_config, max_latency_ratio, narrow=narrow)
    print(f"Depth by latency budget: {choice.reason}")
    return {**overrides, **choice.overrides()}, choice.as_record()
