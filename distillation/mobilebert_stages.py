"""Stages of MobileBERT's knowledge-transfer strategies (paper 001 §3.6, Fig. 2) as pure step arithmetic.

A strategy is a list of stages over optimizer steps; the trainer looks up the stage of the current step,
so a run resumed from a checkpoint continues in the same stage with the same number of steps left.

- AKT: one stage, one loss: all layer-wise terms + pre-training distillation (PD).
- JKT: all layer-wise terms jointly for ``layerwise_steps``, then PD for the remaining steps.
- PKT: one stage per layer (stage ℓ trains layer ℓ; lower layers frozen or tuned with a small learning
  rate; higher layers untouched), then PD.
In JKT and PKT the embeddings and the classifier (MLM/NSP heads, pooler) are copied from the teacher and
stay frozen during the layer-wise stages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["STRATEGIES", "Stage", "parameter_unit", "plan_stages", "stage_at", "unit_lr_scale"]

STRATEGIES = ("akt", "jkt", "pkt")


@dataclass(frozen=True)
class Stage:
    """Steps ``[start, end)`` with one objective: ``combined`` (AKT), ``layerwise`` or ``pd``."""

    name: str
    start: int
    end: int
    objective: str
    layer: int | None = None  # the trained layer of a PKT stage


def plan_stages(
    strategy: str, max_steps: int, num_layers: int, layerwise_steps: int, steps_per_stage: int
) -> list[Stage]:
    if strategy == "akt":
        return [Stage("akt", 0, max_steps, "combined")]
    if strategy == "jkt":
        return [
            Stage("jkt/layerwise", 0, layerwise_steps, "layerwise"),
            Stage("jkt/pd", layerwise_steps, max_steps, "pd"),
        ]
    if strategy == "pkt":
        stages = [
            Stage(f"pkt/layer_{layer}", layer * steps_per_stage, (layer + 1) * steps_per_stage, "layerwise", layer)
            for layer in range(num_layers)
        ]
        return [*stages, Stage("pkt/pd", num_layers * steps_per_stage, max_steps, "pd")]
    raise ValueError(f"`strategy` must be one of {', '.join(STRATEGIES)}, got {strategy!r}.")


def stage_at(stages: list[Stage], step: int) -> Stage:
    """The stage that the optimizer step number ``step`` (0-based) belongs to."""
    for stage in stages:
        if stage.start <= step < stage.end:
            return stage
    return stages[-1]


_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")


def parameter_unit(parameter_name: str) -> str:
    """``embeddings``, ``layer_<i>`` or ``head`` (pooler, MLM and NSP heads) for a parameter name."""
    match = _LAYER.search(parameter_name)
    if match:
        return f"layer_{match.group(1)}"
    if ".embeddings." in f".{parameter_name}":
        return "embeddings"
    return "head"


def unit_lr_scale(unit: str, stage: Stage, lower_layer_lr_scale: float) -> float:
    """Learning-rate multiplier of a unit during a stage (0 means frozen)."""
    if stage.objective in ("combined", "pd"):
        return 1.0
    if not unit.startswith("layer_"):
        return 0.0  # copied from the teacher, frozen during layer-wise transfer
    if stage.layer is None:
        return 1.0  # JKT: every layer at once
    layer = int(unit.split("_")[1])
    if layer == stage.layer:
        return 1.0
    return lower_layer_lr_scale if layer < stage.layer else 0.0
