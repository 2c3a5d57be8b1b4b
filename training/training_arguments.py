"""The training arguments every compact-bert method shares: transformers' ``TrainingArguments`` plus the run-folder
choice that each command applies after training.

Each method's config (``MiniMoEDistillationConfig``, ``FinetuneConfig``, ...) derives from it, as TRL's configs derive
from ``TrainingArguments``, and ``compact-bert pretrain`` parses it directly. Being a dataclass field, the choice
survives ``dataclasses.replace`` (fine-tuning grids, the MiniMoE teacher assistant), ``to_dict`` and the command
line alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import TrainingArguments

__all__ = ["CompactBertTrainingArguments", "has_accelerator"]


def has_accelerator(arguments: TrainingArguments) -> bool:
    """Whether a run will train on an accelerator: without one, PyTorch warns at every data loader that pinned
    memory is useless (four times in the main job) and pins nothing, so commands and jobs turn pinning off."""
    if arguments.use_cpu:
        return False
    accelerator = getattr(torch, "accelerator", None)
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


@dataclass
class CompactBertTrainingArguments(TrainingArguments):
    keep_checkpoints: bool = field(
        default=False,
        metadata={
            "help": "Keep the checkpoint-N folders (weights + optimizer state) in --output_dir after the run "
            "finished; by default they are removed once the final model, summary and card are written, so "
            "that the folder holds only what loads and ships."
        },
    )
