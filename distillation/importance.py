"""Activation-based importance of a teacher's channels, heads and FFN neurons, measured on a few hundred blocks.

The criterion is Minitron's (Muralidharan et al., 2024, "Compact Language Models via Pruning and Knowledge
Distillation", §2.2, activation-based importance), which needs forward passes only — no gradients, no labels:

- a **residual channel**'s importance is the mean magnitude of its value after every LayerNorm of the residual
  stream (the embeddings' and each layer's two), over real tokens — one ranking for the whole model, since
  embeddings and every layer must keep the same channels;
- a **head**'s importance is the mean L2 norm of its attention output (its slice of the context that enters
  ``attention.output.dense``), over real tokens;
- an **FFN neuron**'s importance is the mean magnitude of its activation (what the down-projection reads), over
  real tokens; MoEBERT (Zuo et al., 2022, §3.1) ranks neurons the same way before splitting an FFN into experts.

``measure_block_inputs`` (and ``measure_moe_inputs``, through the whole model) records the mean and covariance of what
a student's MoE block receives: routers of upcycled or split experts are initialized on them so that routing starts
balanced. (The teacher's FFN inputs would
not do: a narrower student's LayerNorms normalize over fewer channels, which shifts the whole distribution.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "TeacherActivationStatistics",
    "first_layer_inputs",
    "measure_block_inputs",
    "measure_moe_inputs",
    "measure_teacher_activations",
]


@dataclass
class TeacherActivationStatistics:
    """What ``measure_teacher_activations`` found; every tensor is float64 on the CPU.

    Attributes:
        channel_importance: ``[hidden]``.
        head_importance: ``[layers, heads]``.
        neuron_importance: ``[layers, intermediate]``, ``None`` for a teacher whose FFNs are experts.
        num_tokens: real tokens the statistics average over.
    """

    channel_importance: torch.Tensor
    head_importance: torch.Tensor
    neuron_importance: torch.Tensor | None
    num_tokens: int


class _Accumulator:
    def __init__(self):
        self.mask: torch.Tensor | None = None  # [batch * seq] bool of the batch running now
        self.sums: dict[str, torch.Tensor] = {}

    def add(self, name: str, values: torch.Tensor) -> None:
        """Add ``values`` (``[batch, seq, ...]``) summed over the real tokens of the current batch."""
        rows = values.detach().reshape(self.mask.shape[0], *values.shape[2:])[self.mask].double()
        total = rows.sum(0)
        self.sums[name] = self.sums[name] + total if name in self.sums else total

    def add_outer(self, name: str, values: torch.Tensor) -> None:
        rows = values.detach().reshape(self.mask.shape[0], -1)[self.mask].double()
        total = rows.T @ rows
        self.sums[name] = self.sums[name] + total if name in self.sums else total


@torch.no_grad()
def measure_teacher_activations(
    teacher: nn.Module, batches: Iterable[dict[str, torch.Tensor]]
) -> TeacherActivationStatistics:
    """Run ``teacher`` (in eval mode, no gradients) over ``batches`` (dicts with ``input_ids``, ``attention_mask``
    and optionally ``token_type_ids``) and return the statistics of the module docstring."""
    encoder = getattr(teacher, "base_model", teacher)
    layers = list(encoder.encoder.layer)
    heads = teacher.config.num_attention_heads
    accumulator = _Accumulator()
    handles = []

    def record(name):
        def hook(module, inputs, output):
            value = output[0] if isinstance(output, tuple) else output
            accumulator.add(name, value.abs())

        return hook

    def record_heads(name):
        def hook(module, inputs):
            context = inputs[0]
            per_head = context.reshape(*context.shape[:2], heads, -1).norm(dim=-1)
            accumulator.add(name, per_head)

        return hook

    handles.append(encoder.embeddings.LayerNorm.register_forward_hook(record("norm.embeddings")))
    for index, layer in enumerate(layers):
        handles.append(layer.attention.output.LayerNorm.register_forward_hook(record(f"norm.attention.{index}")))
        handles.append(layer.output.LayerNorm.register_forward_hook(record(f"norm.ffn.{index}")))
        handles.append(layer.attention.output.dense.register_forward_pre_hook(record_heads(f"heads.{index}")))
        if hasattr(layer, "intermediate"):
            handles.append(layer.intermediate.register_forward_hook(record(f"neurons.{index}")))
    was_training = teacher.training
    teacher.eval()
    num_tokens = 0
    try:
        for batch in batches:
            mask = batch["attention_mask"].reshape(-1).bool()
            accumulator.mask = mask
            num_tokens += int(mask.sum())
            teacher(**{key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in batch})
    finally:
        for handle in handles:
            handle.remove()
        teacher.train(was_training)
    if num_tokens == 0:
        raise ValueError("The calibration data holds no real token (every attention_mask is 0).")
    sums = accumulator.sums
    norms = [name for name in sums if name.startswith("norm.")]
    channels = torch.stack([sums[name] for name in norms]).sum(0) / (num_tokens * len(norms))
    has_neurons = all(f"neurons.{index}" in sums for index in range(len(layers)))
    return TeacherActivationStatistics(
        channel_importance=channels,
        head_importance=torch.stack([sums[f"heads.{index}"] for index in range(len(layers))]) / num_tokens,
        neuron_importance=(
            torch.stack([sums[f"neurons.{index}"] for index in range(len(layers))]) / num_tokens
            if has_neurons
            else None
        ),
        num_tokens=num_tokens,
    )


class _StopAtLayer(Exception):
    """Raised by ``first_layer_inputs``' hook: the rest of the forward is not needed."""


@torch.no_grad()
def first_layer_inputs(model: nn.Module, layer: nn.Module, batches: Iterable[dict[str, torch.Tensor]]) -> list:
    """The ``(args, kwargs)`` that ``layer`` (the model's first encoder layer) receives for each of ``batches``, from
    forwards of ``model`` (in eval mode) that stop there: only the embeddings run."""
    captured = []

    def hook(module, args, kwargs):
        captured.append((args, kwargs))
        raise _StopAtLayer

    handle = layer.register_forward_pre_hook(hook, with_kwargs=True)
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            with contextlib.suppress(_StopAtLayer):
                model(**{key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in batch})
    finally:
        handle.remove()
        model.train(was_training)
    return captured


@torch.no_grad()
def measure_block_inputs(layer: nn.Module, block: nn.Module, layer_inputs: list, masks: list[torch.Tensor]):
    """Mean ``[hidden]`` and covariance ``[hidden, hidden]`` (float64) of the real tokens (``masks``: ``[batch *
    seq]`` bool per batch) entering ``block`` when ``layer`` (in eval mode) runs on ``layer_inputs``
    (``first_layer_inputs``' form): one layer's forward per batch, whatever the depth."""
    accumulator = _Accumulator()

    def hook(module, inputs):
        accumulator.add("sum", inputs[0])
        accumulator.add_outer("outer", inputs[0])

    handle = block.register_forward_pre_hook(hook)
    num_tokens = 0
    try:
        for (args, kwargs), mask in zip(layer_inputs, masks):
            accumulator.mask = mask
            num_tokens += int(mask.sum())
            layer(*args, **kwargs)
    finally:
        handle.remove()
    mean = accumulator.sums["sum"] / num_tokens
    return mean, accumulator.sums["outer"] / num_tokens - torch.outer(mean, mean)


@torch.no_grad()
def measure_moe_inputs(model: nn.Module, moe_block: nn.Module, batches: Iterable[dict[str, torch.Tensor]]):
    """Mean ``[hidden]`` and covariance ``[hidden, hidden]`` (float64) of the real tokens entering ``moe_block`` of
    ``model`` (run in eval mode) over ``batches``."""
    accumulator = _Accumulator()

    def hook(module, inputs):
        accumulator.add("sum", inputs[0])
        accumulator.add_outer("outer", inputs[0])

    handle = moe_block.register_forward_pre_hook(hook)
    was_training = model.training
    model.eval()
    num_tokens = 0
    try:
        for batch in batches:
            accumulator.mask = batch["attention_mask"].reshape(-1).bool()
            num_tokens += int(accumulator.mask.sum())
            model(**{key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in batch})
    finally:
        handle.remove()
        model.train(was_training)
    mean = accumulator.sums["sum"] / num_tokens
    return mean, accumulator.sums["outer"] / num_tokens - torch.outer(mean, mean)
