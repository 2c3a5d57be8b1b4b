"""Re-balance a distilled MoE model's routers on the task's own text before fine-tuning.

A router learned on the distillation corpus can send most of a new task's tokens to one expert (74% in
one block, measured on MRPC sentences); with a capacity limit those tokens are dropped past their FFN from the first
step. Fine-tuning without a capacity limit (``--capacity_factor none``, the default) avoids the drops but keeps the
imbalance; this module is the other remedy: shift each learned router's **bias** so that, on the first training
examples, every expert is the top-1 choice of an equal share of real tokens. The router's weights (what it learned
to tell apart) are untouched. The shift is the per-expert bias of the auxiliary-loss-free balancing of DeepSeek-V3
(Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts"), found here in one pass
on fixed logits instead of updated during training — with one difference: there the bias only selects the
expert, here it is added to the router's own bias, so it also changes the gate ``p_k`` that scales the chosen
expert's output (paper 003 eq. 3) for every token, not only for the tokens whose expert changes. The
``capacity_remedies`` recipe measures what that costs against no capacity limit at all.

Blocks are balanced in order: a block's routing inputs are measured with the routers before it already shifted.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

__all__ = ["balancing_bias", "rebalance_routers"]

BALANCING_ROUNDS = 200


def _load(logits: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Share of tokens whose top-1 expert is each expert under ``logits + bias``."""
    choice = (logits + bias).argmax(dim=-1)
    return torch.bincount(choice, minlength=logits.shape[-1]).to(logits.dtype) / logits.shape[0]


def balancing_bias(logits: torch.Tensor, rounds: int = BALANCING_ROUNDS) -> torch.Tensor:
    """A per-expert bias for ``logits`` ``[tokens, experts]`` that makes their top-1 loads as equal as it can:
    each round moves every expert's bias against its excess load, in steps that shrink from the logits' own spread;
    the bias with the smallest largest load is returned."""
    num_experts = logits.shape[-1]
    fair = 1.0 / num_experts
    step = float(logits.std().clamp(min=1e-6))
    bias = torch.zeros(num_experts, dtype=logits.dtype)
    best, best_max = bias.clone(), float(_load(logits, bias).max())
    for round_index in range(rounds):
        load = _load(logits, bias)
        bias = bias - step * (load - fair) / fair / (1 + round_index) ** 0.5
        bias = bias - bias.mean()
        largest = float(_load(logits, bias).max())
        if largest < best_max:
            best, best_max = bias.clone(), largest
    return best


def _learned_routers(model: nn.Module) -> list[nn.Module]:
    """Every learned router (a ``router`` module with a ``gate`` linear map), recognised by structure so that a
    model loaded through remote code (its own copy of the classes) counts too, as in ``peft_support``."""
    return [
        module
        for name, module in model.named_modules()
        if name.rpartition(".")[2] == "router" and isinstance(getattr(module, "gate", None), nn.Linear)
    ]


@torch.no_grad()
def rebalance_routers(model: nn.Module, batches: Iterable[dict[str, torch.Tensor]]) -> list[dict]:
    """Shift every learned router's bias so that the real tokens of ``batches`` spread evenly over its experts;
    returns, per router, the largest expert share before and after. Hash routers (nothing learned) are skipped."""
    batches = list(batches)
    routers = _learned_routers(model)
    if not routers:
        raise ValueError("rebalance_routers: the model has no learned router (a dense model, or hash routing).")
    was_training = model.training
    model.eval()
    record = []
    try:
        for router in routers:
            captured: list[torch.Tensor] = []
            mask: list[torch.Tensor] = []
            handle = router.gate.register_forward_hook(lambda module, inputs, output: captured.append(output.float()))  # noqa: B023
            try:
                for batch in batches:
                    mask.append(batch["attention_mask"].reshape(-1).bool())
                    model(
                        **{
                            key: batch[key]
                            for key in ("input_ids", "attention_mask", "token_type_ids")
                            if key in batch
                        }
                    )
            finally:
                handle.remove()
            logits = torch.cat([output.reshape(-1, output.shape[-1])[real] for output, real in zip(captured, mask)])
            bias = balancing_bias(logits.double())
            router.gate.bias.add_(bias.to(router.gate.bias.dtype))
            record.append(
                {
                    "max_expert_share_before": round(float(_load(logits.double(), torch.zeros_like(bias)).max()), 4),
                    "max_expert_share_after": round(float(_load(logits.double(), bias).max()), 4),
                }
            )
    finally:
        model.train(was_training)
    return record
