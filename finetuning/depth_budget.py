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
(``examples/tiny_students.py``). So a dense preset is also timed at half the teacher's depth in narrowed shapes
(``narrowed_shapes``), the widest residual stream first (and, at one width, the larger FFN first), and the first that
fits is chosen where no whole student that deep fits.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from fractions import Fraction

from ..configuration.shape_text import counted, describe_shape

__all__ = [
    "DepthChoice",
    "LATENCY_BUDGET_ROUNDS",
    "NARROWED_WIDTHS",
    "UNLABELED_NARROWED_WIDTHS",
    "budgeted_overrides",
    "check_max_latency_ratio",
    "deepest_student_within_budget",
    "narrowed_shapes",
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
    narrowed_ratio: float | None = None  # the chosen narrowed shape's measured ratio (None: none chosen)
    narrowed_ratios: dict[str, float] = field(default_factory=dict)  # every narrowed shape measured, by description
    sequence_length: int = SEQUENCE_LENGTH  # the timed inputs' length: less for a model with fewer positions

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
            "narrowed_latency_ratios": dict(self.narrowed_ratios),
            "measured_ms_by_depth": {str(depth): ms for depth, ms in self.measured_ms.items()},
            "sequence_length": self.sequence_length,
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


# The tiny-student widths, widest residual stream first and, at one width, the larger FFN first: (share of the
# student's heads, FFN neurons as a multiple of the residual width, or None for half of the student's own FFN).
NARROWED_WIDTHS = ((5, 6, 2), (5, 6, Fraction(7, 5)), (3, 4, 2), (2, 3, None))
# The tiny-student width where the student learns from in-domain text without labels (``--unlabeled_file``): two
# thirds of the heads and an FFN twice the residual width (256 channels, 8 heads, 512 FFN neurons for the main job's
# preset). With that transfer set it keeps the teacher's quality at a latency with a margin under 0.3x on every
# machine measured (examples/tiny_students.py, docs/students.md), so it is the one width tried.
UNLABELED_NARROWED_WIDTHS = ((2, 3, 2),)


def narrowed_shapes(student_config, widths=NARROWED_WIDTHS) -> list[dict]:
    """The tiny-student widths in the order the budget tries them, each in whole heads of the student's head size —
    the student's most important channels, heads and neurons when it starts from its teacher (``NARROWED_WIDTHS``;
    for the main job's 384-wide preset):

    1. five sixths of the heads and an FFN twice the residual width: 320 channels, 10 heads, 640 FFN neurons;
    2. the same attention with an FFN 1.4 times the residual width: 320 channels, 10 heads, 448 FFN neurons;
    3. three quarters of the heads and an FFN twice the residual width: 288 channels, 9 heads, 576 FFN neurons;
    4. two thirds of the heads and half of each FFN: 256 channels, 8 heads, 768 FFN neurons.

    With 3 layers they kept, on the dev sets (two seeds; ``examples/tiny_students.py``, docs/students.md "Capacity at
    the same latency"), 96.4 / 101.3 / 95.4%, 95.5 / 101.4 / 95.1%, 94.98 / 101.3 / 94.96% and 94.5 / 100.6 / 94.1%
    of the packaged teacher on SST-2 / STS-B / CoNLL-2003, and all four cost 0.26-0.36x of it at batch 1 x 128 on
    compact-bert's eager path depending on the machine (a layer's fixed per-operation cost dominates at this size):
    which fits a budget of 0.3 is a measurement, not a constant. A shape is left out where it would be no larger
    than the next one tried (no more heads, or as many heads and no more FFN neurons). ``widths``:
    ``UNLABELED_NARROWED_WIDTHS`` for a student that learns from text without labels."""
    head_size = student_config.hidden_size // student_config.num_attention_heads
    heads = student_config.num_attention_heads
    shapes: list[dict] = []
    for numerator, denominator, ffn_multiple in reversed(widths):  # narrowest first, to drop repeats
        kept_heads = max(1, (numerator * heads) // denominator)
        hidden_size = kept_heads * head_size
        intermediate_size = (
            max(1, int(ffn_multiple * hidden_size)) if ffn_multiple else max(1, student_config.intermediate_size // 2)
        )
        if shapes and (kept_heads, intermediate_size) <= (
            shapes[0]["num_attention_heads"],
            shapes[0]["intermediate_size"],
        ):
            continue
        shapes.insert(
            0,
            {"hidden_size": hidden_size, "num_attention_heads": kept_heads, "intermediate_size": intermediate_size},
        )
    return shapes


def deepest_student_within_budget(
    student_config,
    teacher_config,
    max_latency_ratio: float,
    rounds: int = LATENCY_BUDGET_ROUNDS,
    narrow: bool = False,
    unlabeled: bool = False,
) -> DepthChoice:
    """The deepest ``student_config`` (1 layer up to one fewer than the teacher's) whose latency is at most
    ``max_latency_ratio`` × the teacher's (module docstring). With ``narrow``, the tiny-student shapes are measured
    too: half the teacher's depth (rounded up) at each ``narrowed_shapes`` width. Where no whole student that deep
    fits, the first of them that fits (in ``narrowed_shapes`` order) is chosen — at 0.3x of the packaged teacher, 3
    narrowed layers kept more of the teacher on SST-2, STS-B and CoNLL-2003 than 2 whole-width layers with half their
    FFNs, and far more than 1 whole layer (examples/tiny_students.py, docs/students.md); with ``unlabeled`` (the
    student learns from text without labels), the one width of ``UNLABELED_NARROWED_WIDTHS``. Raises ``ValueError``
    when nothing fits, naming the ratios."""
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
    tried = UNLABELED_NARROWED_WIDTHS if unlabeled else NARROWED_WIDTHS
    widths = narrowed_shapes(student_config, tried) if narrow else []
    for index, width in enumerate(widths):
        configs[f"narrowed {index}"] = copy.deepcopy(student_config)
        for name, value in {**width, "num_hidden_layers": kept_depth}.items():
            setattr(configs[f"narrowed {index}"], name, value)
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
    narrowed_ratios = [
        round(measured.pop(f"narrowed {index}").median_ms / teacher_ms, 3) for index in range(len(widths))
    ]
    fixed_ms, per_layer_ms = _line({depth: result.median_ms for depth, result in measured.items()})
    ratios = {depth: round((fixed_ms + per_layer_ms * depth) / teacher_ms, 3) for depth in measured}
    fitting = [depth for depth, ratio in ratios.items() if ratio <= max_latency_ratio]
    table = ", ".join(f"{counted(depth, 'layer')} {ratio:.2f}x" for depth, ratio in ratios.items())
    shapes = [describe_shape(kept_depth, width) for width in widths]
    for shape, ratio in zip(shapes, narrowed_ratios, strict=True):
        table += f"; {shape} {ratio:.2f}x"
    fitting_widths = [index for index, ratio in enumerate(narrowed_ratios) if ratio <= max_latency_ratio]
    take_narrowed = bool(fitting_widths) and max(fitting, default=0) < kept_depth
    if not fitting and not take_narrowed:
        raise ValueError(
            f"--max_latency_ratio {max_latency_ratio}: no student depth fits; measured against the teacher "
            f"({teacher_ms:.1f} ms at batch 1 x {length}): {table}. Give a larger ratio or a narrower preset."
        )
    context = f"teacher {teacher_ms:.1f} ms, batch 1 x {length}, compact-bert's eager path; every shape: {table}."
    medians = {depth: round(result.median_ms, 2) for depth, result in measured.items()}
    measured_shapes = dict(zip(shapes, narrowed_ratios, strict=True))
    common = (max_latency_ratio, round(teacher_ms, 2), ratios, medians)
    if take_narrowed:
        chosen = fitting_widths[0]
        deepest = counted(max(fitting), "whole layer") if fitting else "not one whole layer"
        if chosen:  # what each wider shape would have cost
            costs = [f"{shapes[index]} would be {narrowed_ratios[index]:.2f}x" for index in range(chosen)]
            wider = f" ({', '.join(costs)})"
        else:
            wider = " (the widest narrowed shape)" if len(widths) > 1 else ""
        reason = (
            f"{shapes[chosen]}{wider}: {kept_depth} whole layers do not fit within {max_latency_ratio}x of the "
            f"teacher's latency on this machine, {deepest} would; narrower at that depth keeps more of the teacher "
            f"({narrowed_ratios[chosen]:.2f}x; {context}"
        )
        return DepthChoice(
            kept_depth, *common, reason, widths[chosen], narrowed_ratios[chosen], measured_shapes, length
        )
    depth = max(fitting)
    deeper = f"; {counted(depth + 1, 'layer')} would be {ratios[depth + 1]:.2f}x" if depth + 1 in ratios else ""
    reason = (
        f"{counted(depth, 'layer')}: the deepest student within {max_latency_ratio}x of the teacher's latency on this machine "
        f"({ratios[depth]:.2f}x{deeper}; {context}"
    )
    return DepthChoice(depth, *common, reason, None, None, measured_shapes, length)


def budgeted_overrides(
    student_config,
    teacher: str,
    max_latency_ratio: float,
    overrides: dict,
    overrides_flag: str,
    unlabeled: bool = False,
) -> tuple[dict, dict]:
    """What ``--max_latency_ratio`` does on ``finetune`` and ``distill task``: the student's config ``overrides``
    (the JSON object of ``--<overrides_flag>``) with the depth chosen against ``teacher`` (a folder or the packaged
    name) — or, for a dense student whose width the overrides leave open, the narrower tiny-student shape where no
    whole student half the teacher's depth fits (``unlabeled``: the width for a student that learns from text without
    labels) — printed with its reason, and the record of the choice. ``ValueError`` names the flag to change."""
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
    choice = deepest_student_within_budget(
        student_config, teacher_config, max_latency_ratio, narrow=narrow, unlabeled=unlabeled
    )
    print(f"Depth by latency budget: {choice.reason}")
    return {**overrides, **choice.overrides()}, choice.as_record()
