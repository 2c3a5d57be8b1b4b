"""The training arguments every compact-bert method shares: transformers' ``TrainingArguments`` plus the run-folder
choices: whether a run may write over a folder that already holds a model or a run (``--overwrite_output_dir``,
applied before any work by ``training/output_folders.py``) and what it leaves there after training.

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
    # transformers 4.57 has this field and never acts on it; transformers 5 removed it. Declared here, the flag means
    # the same on both lines: the user's consent to write over an output folder that holds a model or a run.
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Write into --output_dir even when it already holds a model or a run (config.json and weights, "
            "run_summary.json, checkpoint-N folders, an export) or is, or lies inside, one of the run's inputs; "
            "without it such a run is refused before any work. An unfinished run is continued with "
            "--resume_from_checkpoint last instead."
        },
    )
    keep_checkpoints: bool = field(
        default=False,
        metadata={
            "help": "Keep the checkpoint-N folders (weights + optimizer state) in --output_dir after the run "
            "finished; by default they are removed once the final model, summary and card are written, so "
            "that the folder holds only what loads and ships."
        },
    )
