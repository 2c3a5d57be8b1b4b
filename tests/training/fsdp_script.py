"""Launched by ``test_fsdp.py`` with ``accelerate launch`` on 2 CPU processes (gloo): each run of ``fsdp_runs``
under FSDP2, then again resumed from its step-3 checkpoint. The main process writes ``fsdp.json``: the losses,
the evaluation loss, what each process held of the teacher, and where the final models were saved."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor
from transformers import TrainerCallback

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsdp_runs import (
    SAVE_STEPS,
    distillation_trainer,
    finetune_trainer,
    masked_lm_trainer,
    minimoe_model,
    train_losses,
)


def _teacher_facts(teacher: torch.nn.Module) -> dict:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    parameters = list(teacher.parameters())
    whole = get_model_state_dict(teacher, options=StateDictOptions(full_state_dict=True))  # a collective
    reference = minimoe_model(0).state_dict()
    return {
        "sharded_parameters": sum(isinstance(parameter, DTensor) for parameter in parameters),
        "parameters": len(parameters),
        "local_elements": sum(
            (parameter.to_local() if isinstance(parameter, DTensor) else parameter).numel() for parameter in parameters
        ),
        "elements": sum(parameter.numel() for parameter in parameters),
        "frozen_in_evaluation_mode": not teacher.training and not any(p.requires_grad for p in parameters),
        "unchanged": all(torch.equal(whole[name], reference[name]) for name in reference),
    }


class StepCounter(TrainerCallback):
    """How many optimizer steps this run took itself: a resumed run must take only those after its checkpoint."""

    def __init__(self):
        self.steps = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1


def _run(name: str, build, output: Path, resume: bool) -> dict:
    folder = output / name
    trainer = build(str(folder), sharded=True)
    counter = StepCounter()
    trainer.add_callback(counter)
    result = {"distributed_type": str(trainer.accelerator.distributed_type)}
    trainer.train(resume_from_checkpoint=str(folder / f"checkpoint-{SAVE_STEPS}") if resume else None)
    result["steps_taken"] = counter.steps
    result["losses"] = train_losses(trainer)
    result["eval_loss"] = trainer.evaluate()["eval_loss"]
    if hasattr(trainer, "teacher"):
        result["teacher"] = _teacher_facts(trainer.teacher)
    final = folder / ("final-resumed" if resume else "final")
    trainer.save_model(str(final))
    result["final"] = str(final)
    trainer.accelerator.wait_for_everyone()
    return result


def main(output: str) -> None:
    output = Path(output)
    results = {}
    runs = {"distillation": distillation_trainer, "finetune": finetune_trainer, "masked_lm": masked_lm_trainer}
    for name, build in runs.items():
        results[name] = _run(name, build, output, resume=False)
        results[f"{name}_resumed"] = _run(name, build, output, resume=True)
    if torch.distributed.get_rank() == 0:
        (output / "fsdp.json").write_text(json.dumps(results, indent=1))
    # As ``cli.main._close_process_group``: the finished trainers are garbage in reference cycles, and FSDP2's
    # modules hold the group. Collected during interpreter shutdown instead, gloo's threads abort the process
    # ("terminate called without an active exception") after every result was written (CI, tf457, 2026-11-29).
    gc.collect()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
