"""Cost of one distillation step against one plain MLM step of the same student, side by side.

Each "step" is the trainer's own ``training_step`` (forward + loss + backward; the optimizer update is
the same for both and left out), on the same batch of 16 blocks of 128 tokens from the bundled corpus.
The teacher's forward pass is timed alone as well, since a distillation step cannot cost less than the
plain step plus the teacher's forward. Both steps of a pair train the same student class, with the same head, so
the ratio is the cost of distillation alone:

1. MobileBERT (AKT, the strategy with every term) from an IB-BERT teacher, recipe sizes
   (target: <= 1.6 x MLM step + teacher forward).
2. MiniMoE 4L;192H (4 experts) from the packaged all-MiniLM-L6-v2.
3. MoE-BERT (TCD, H=128, 4 layers, 16 experts) from a vanilla BERT of the same shape.

Run: ``python benchmarks/bench_distillation_step.py``
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from transformers import Trainer, TrainingArguments

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The MobileBERT recipe's sizes live in the checkout's examples/ (not installed): the repository root is importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from timing import compare_latencies, format_seconds

from compact_bert.configuration import preset_config
from compact_bert.distillation.data import PretrainingCollator, default_tokenizer
from compact_bert.distillation.minimoe_config import MiniMoEDistillationConfig
from compact_bert.distillation.minimoe_trainer import MiniMoEDistillationTrainer
from compact_bert.distillation.mobilebert_config import MobileBertDistillationConfig
from compact_bert.distillation.mobilebert_trainer import MobileBertDistillationTrainer
from compact_bert.distillation.tcd_config import TransferCapabilityDistillationConfig
from compact_bert.distillation.tcd_trainer import TransferCapabilityDistillationTrainer
from compact_bert.distillation.teachers import load_encoder
from compact_bert.modeling import (
    CompactMobileBertForPreTraining,
    IBBertForPreTraining,
    MiniMoEForMaskedLM,
    MoEBertForMaskedLM,
    MoEBertModel,
)
from examples.mobilebert_small import STUDENT, TEACHER

COMMON = {"report_to": "none", "use_cpu": True, "disable_tqdm": True, "max_steps": 10}


def _batch(with_pairs: bool) -> dict:
    torch.manual_seed(0)
    tokenizer = default_tokenizer()
    content = 125 if with_pairs else 126
    blocks = [{"input_ids": torch.randint(1000, 30000, (content,)).tolist()} for _ in range(16)]
    collator = PretrainingCollator(tokenizer, 0.15, next_sentence_prediction=with_pairs)
    return collator.draw_training_targets(collator(blocks), torch.Generator().manual_seed(0))


def _report(label: str, times: dict[str, float], target: str) -> None:
    distill, plain, teacher = times["distillation_step"], times["mlm_step"], times["teacher_forward"]
    print(
        f"{label}: distillation step {format_seconds(distill)}, MLM step {format_seconds(plain)}, "
        f"teacher forward {format_seconds(teacher)} -> {distill / plain:.2f}x the MLM step, "
        f"{(distill - teacher) / plain:.2f}x it after subtracting the teacher forward ({target})"
    )


def _measure(distill_trainer, plain_trainer, teacher_call, batch, rounds: int = 8) -> dict[str, float]:
    student, plain = distill_trainer.model.train(), plain_trainer.model.train()
    for trainer in (distill_trainer, plain_trainer):
        trainer.current_gradient_accumulation_steps = 1  # normally set by the training loop
    return compare_latencies(
        {
            "distillation_step": lambda: distill_trainer.training_step(student, dict(batch)),
            "mlm_step": lambda: plain_trainer.training_step(plain, dict(batch)),
            "teacher_forward": teacher_call,
        },
        rounds=rounds,
        warmup=2,
        inference=False,
    )


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch 16 x 128 tokens")
    output = tempfile.mkdtemp()

    batch = _batch(with_pairs=True)
    teacher = IBBertForPreTraining(preset_config("ib-bert-large", **TEACHER)).eval()
    student_config = preset_config("mobilebert", **STUDENT)
    distill = MobileBertDistillationTrainer(
        model=CompactMobileBertForPreTraining(student_config),
        teacher=teacher,
        args=MobileBertDistillationConfig(output_dir=output, strategy="akt", **COMMON),
    )
    plain = Trainer(
        model=CompactMobileBertForPreTraining(student_config), args=TrainingArguments(output_dir=output, **COMMON)
    )
    inputs = {key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    teacher_call = lambda: teacher(**inputs, output_hidden_states=True, output_attentions=True)
    _report("MobileBERT AKT", _measure(distill, plain, lambda: _no_grad(teacher_call), batch), "target <= 1.6x")

    batch = _batch(with_pairs=False)
    inputs = {key: batch[key] for key in ("input_ids", "attention_mask")}
    teacher = load_encoder("all-MiniLM-L6-v2").eval()
    config = preset_config("minimoe-4l-192h")
    # Like for like: the distilled student carries the same MLM head as the plain step's (it computes the logits and
    # no loss from them), so the ratio is the cost of distillation, not of a missing vocabulary projection.
    distill = MiniMoEDistillationTrainer(
        model=MiniMoEForMaskedLM(config),
        teacher=teacher,
        args=MiniMoEDistillationConfig(output_dir=output, **COMMON),
    )
    plain = Trainer(model=MiniMoEForMaskedLM(config), args=TrainingArguments(output_dir=output, **COMMON))
    _report(
        "MiniMoE relation distillation",
        _measure(distill, plain, lambda: _no_grad(lambda: teacher(**inputs)), batch),
        "report",
    )

    small = {"num_hidden_layers": 4, "num_experts": 16}
    teacher = MoEBertModel(preset_config("vanilla-bert-small", num_hidden_layers=4)).eval()
    config = preset_config("moe-bert-small", **small)
    distill = TransferCapabilityDistillationTrainer(
        model=MoEBertForMaskedLM(config),
        teacher=teacher,
        args=TransferCapabilityDistillationConfig(output_dir=output, sampled_tokens=2048, **COMMON),
    )
    plain = Trainer(model=MoEBertForMaskedLM(config), args=TrainingArguments(output_dir=output, **COMMON))
    _report(
        "MoE-BERT TCD",
        _measure(distill, plain, lambda: _no_grad(lambda: teacher(**inputs, output_hidden_states=True)), batch),
        "report",
    )


def _no_grad(call):
    with torch.no_grad():
        return call()


if __name__ == "__main__":
    main()
