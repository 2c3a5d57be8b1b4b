"""MiniLMv2 relation distillation: the relation loss alone and whole distillation steps with each way of computing
it, side by side in one run.

- "autograd": the direct formulation (``log_softmax`` of both relations, ``xlogy`` and products, autograd through
  all of it), kept here as the reference;
- "eager": the ``eager`` relation kernel (chunks of relation heads that stay in the CPU's cache, the gradient
  ``softmax(S) − softmax(T)`` formed once), the fallback where no C compiler exists;
- "native": the ``native`` relation kernel (one compiled C pass per relation row, gradient in the same pass), the
  default on CPU.
The main job's step: batch 16 x 128 tokens of the bundled corpus, MiniMoE 4L;192H student and the packaged
all-MiniLM-L6-v2 teacher, 32 relation heads.

Prints each candidate's median, the loss's share of a step, and distillation throughput in tokens per second.

Run: ``python benchmarks/bench_relation_loss.py``
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import compare_latencies

from compact_bert.configuration import preset_config
from compact_bert.distillation.losses import self_attention_relation_loss
from compact_bert.distillation.relation_kernels.native import load_native_library
from compact_bert.distillation.teachers import load_encoder, relation_module_names
from compact_bert.modeling import MiniMoEModel
from compact_bert.modeling.signals import SubmoduleRecorder

BATCH, SEQUENCE, RELATION_HEADS = 16, 128, 32


def autograd_relation_loss(student_states, teacher_states, num_relation_heads=32, attention_mask=None):
    """The relation loss before the fused form (same values and gradients: tests/distillation/test_relation_losses)."""

    def log_relation(states):
        batch, seq, width = states.shape
        split = states.float().view(batch, seq, num_relation_heads, width // num_relation_heads).transpose(1, 2)
        scores = split @ split.transpose(-1, -2) / (width // num_relation_heads) ** 0.5
        if attention_mask is not None:
            scores = scores.masked_fill(~attention_mask.bool()[:, None, None, :], torch.finfo(scores.dtype).min)
        return F.log_softmax(scores, dim=-1)

    losses = []
    mask = torch.ones(student_states["query"].shape[:2]) if attention_mask is None else attention_mask
    for name in ("query", "key", "value"):
        teacher = log_relation(teacher_states[name]).exp()
        divergence = (torch.xlogy(teacher, teacher) - teacher * log_relation(student_states[name])).sum(-1).mean(1)
        weights = mask.to(divergence.dtype)
        losses.append((divergence * weights).sum() / weights.sum())
    return torch.stack(losses).mean()


def _loss_only() -> dict[str, float]:
    generator = torch.Generator().manual_seed(0)
    mask = torch.ones(BATCH, SEQUENCE, dtype=torch.long)
    student = {
        name: torch.randn(BATCH, SEQUENCE, 192, generator=generator, requires_grad=True)
        for name in ("query", "key", "value")
    }
    teacher = {name: torch.randn(BATCH, SEQUENCE, 384, generator=generator) for name in ("query", "key", "value")}

    def step(loss_function):
        def run():
            loss_function(student, teacher, RELATION_HEADS, mask).backward()

        return run

    return compare_latencies(
        {name: step(function) for name, function in _CANDIDATES.items()}, rounds=10, warmup=2, inference=False
    )


def _distillation_steps() -> dict[str, float]:
    """One distillation step as ``MiniMoEDistillationTrainer.compute_loss`` takes it (student forward with its Q/K/V
    recorded, teacher forward under ``no_grad``, relation loss plus balance loss) and its backward pass; the optimizer
    update is the same for both and left out."""
    teacher = load_encoder("all-MiniLM-L6-v2").eval()
    torch.manual_seed(0)
    student = MiniMoEModel(preset_config("minimoe-4l-192h")).train()
    generator = torch.Generator().manual_seed(0)
    batch = {
        "input_ids": torch.randint(1000, 30000, (BATCH, SEQUENCE), generator=generator),
        "attention_mask": torch.ones(BATCH, SEQUENCE, dtype=torch.long),
    }
    student_names = relation_module_names(student.config.num_hidden_layers - 1)
    teacher_names = relation_module_names(teacher.config.num_hidden_layers - 1)

    def step(loss_function):
        def run():
            with SubmoduleRecorder(student, student_names) as recorded:
                outputs = student(**batch)
            with torch.no_grad(), SubmoduleRecorder(teacher, teacher_names) as targets:
                teacher(**batch)
            loss = loss_function(recorded.outputs, targets.outputs, RELATION_HEADS, batch["attention_mask"])
            (loss + outputs.aux_loss).backward()
            student.zero_grad(set_to_none=True)

        return run

    return compare_latencies(
        {name: step(function) for name, function in _CANDIDATES.items()}, rounds=8, warmup=2, inference=False
    )


def main() -> None:
    load_native_library()  # built (or found in the cache) before anything is timed
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {BATCH} x {SEQUENCE} tokens, "
        f"{RELATION_HEADS} relation heads, student 192 wide, teacher 384 wide"
    )
    loss = _loss_only()
    steps = _distillation_steps()
    tokens = BATCH * SEQUENCE
    for name in _CANDIDATES:
        print(
            f"{name:>8}: relation loss forward+backward {loss[name] * 1e3:6.0f} ms "
            f"({loss['autograd'] / loss[name]:.1f}x faster than autograd); distillation step {steps[name] * 1e3:6.0f} ms, "
            f"the loss {loss[name] / steps[name]:.0%} of it; {tokens / steps[name]:.0f} tokens/s"
        )


_CANDIDATES = {
    "autograd": autograd_relation_loss,
    "eager": lambda *args: self_attention_relation_loss(*args, kernel="eager"),
    "native": lambda *args: self_attention_relation_loss(*args, kernel="native"),
}


if __name__ == "__main__":
    main()
