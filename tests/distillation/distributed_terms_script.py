"""Launched by ``test_trainer_utils.py`` with ``accelerate launch`` on 2 CPU processes (gloo).

Each process records terms whose values differ between processes; the logged value must be the mean over
both processes. Each process also checks that its teacher went through the accelerator: on its device, not
wrapped for gradient synchronisation, frozen, and bitwise unchanged by training.
"""

from __future__ import annotations

import gc
import json
import sys

import torch
from transformers import TrainingArguments

from compact_bert.configuration import MoEBertConfig
from compact_bert.distillation.trainer_utils import DistillationTrainer
from compact_bert.modeling import MoEBertForMaskedLM, MoEBertModel


def same_device(first: torch.device, second: torch.device) -> bool:
    """``cpu`` and ``cpu:0`` (the accelerator's name for it) are the same device."""
    return first.type == second.type and (first.index or 0) == (second.index or 0)


class ProcessTermsTrainer(DistillationTrainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        with torch.no_grad():
            self.teacher(input_ids=inputs["input_ids"])
        rank = self.accelerator.process_index
        terms = {"process_index": rank, "process_step": 10 * rank + self.state.global_step, "mlm_loss": outputs.loss}
        self.record_loss_terms(terms, "train" if model.training else "eval")
        return (outputs.loss, outputs) if return_outputs else outputs.loss


def main(output_dir: str) -> None:
    torch.manual_seed(0)
    common = {
        "vocab_size": 64,
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "max_position_embeddings": 16,
    }
    teacher = MoEBertModel(MoEBertConfig(**common, num_experts=1))
    student = MoEBertForMaskedLM(MoEBertConfig(**common, num_experts=1))
    generator = torch.Generator().manual_seed(1)
    examples = [
        {"input_ids": ids, "labels": ids.clone()} for ids in torch.randint(1, 64, (32, 8), generator=generator)
    ]
    args = TrainingArguments(
        output_dir=output_dir,
        max_steps=4,
        per_device_train_batch_size=2,
        logging_steps=2,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
        ddp_find_unused_parameters=True,
    )
    trainer = ProcessTermsTrainer(
        model=student, teacher=teacher, args=args, train_dataset=examples, eval_dataset=examples[:8]
    )
    before = {name: tensor.clone() for name, tensor in teacher.state_dict().items()}
    trainer.train()
    metrics = trainer.evaluate()
    assert trainer.accelerator.num_processes == 2
    assert not isinstance(trainer.teacher, torch.nn.parallel.DistributedDataParallel)
    assert isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel)
    assert all(same_device(parameter.device, trainer.accelerator.device) for parameter in trainer.teacher.parameters())
    assert not trainer.teacher.training and not any(parameter.requires_grad for parameter in teacher.parameters())
    assert all(torch.equal(before[name], tensor) for name, tensor in teacher.state_dict().items())
    if trainer.is_world_process_zero():
        result = {"log_history": trainer.state.log_history, "metrics": metrics}
        with open(f"{output_dir}/terms.json", "w") as file:
            json.dump(result, file)
    accelerator = trainer.accelerator
    accelerator.wait_for_everyone()
    # The DDP wrapper's reducer holds the gloo process group: if it is still alive when the interpreter shuts
    # down, the group's worker threads are destroyed there and the process aborts ("terminate called without an
    # active exception"). Release every wrapper while the interpreter runs, then destroy the group.
    accelerator.free_memory()
    del trainer, student, teacher
    gc.collect()
    accelerator.end_training()


if __name__ == "__main__":
    main(sys.argv[1])
