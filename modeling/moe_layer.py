"""The one top-1 mixture-of-experts layer shared by MiniMoE and MoE-BERT (DESIGN.md §2.4).

Routing (``TopOneRouter`` or ``HashRouter``) decides one expert per real token; ``route_tokens`` applies
the capacity limit and computes the balance loss and load statistics; ``ExpertDispatch`` groups the kept
tokens by expert so that each expert runs once over a contiguous slice. Padding tokens are never routed:
they take no capacity, do not count in the balance loss and get a zero MoE output.

Dispatch runs each expert once over its own tokens, a loop over *experts* (never tokens): in eager mode
one stable argsort of the expert ids plus a bincount sort the kept tokens by expert, one gather brings them
into that order, each expert multiplies its contiguous slice and one scatter writes the results back; under
``torch.export`` / ``torch.compile`` a fixed ``for e in range(num_experts)`` loop selects each expert's tokens
with ``nonzero`` instead, so the traced program stays correct for any routing. What multiplies each expert's tokens
(the loop, one grouped GEMM, oneDNN-packed weights) is the expert implementation ``config.moe_implementation``
selects (``moe_implementations``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers.activations import ACT2FN

from .moe_implementations import ALL_MOE_IMPLEMENTATIONS, ExpertDispatch, exporting
from .packed_weights import FUSED_ACTIVATIONS

__all__ = [
    "ExpertDispatch",
    "ExpertLinear",
    "HashRouter",
    "MoEExperts",
    "MoEFeedForward",
    "RoutingDecision",
    "TopOneRouter",
    "build_router",
    "hash_routing_table",
    "summarize_routing",
    "load_balancing_loss",
    "route",
    "route_tokens",
]


@dataclass
class RoutingDecision:
    """Where each of ``T`` flattened tokens goes.

    Attributes:
        expert_index: ``[T]`` chosen expert (for padding tokens: meaningless).
        gate: ``[T]`` float32 weight of the expert output: the router probability of the chosen expert
            (eq. 3 of paper 003), 1 for hash routing.
        keep: ``[T]`` bool, real token within its expert's capacity.
        router_logits: ``[T, num_experts]`` float32, ``None`` for hash routing.
        aux_loss: unweighted balance loss of this block (0 for hash routing, which has nothing to learn).
        expert_load: ``[num_experts]`` fraction of real tokens whose top-1 choice is each expert.
        dropped_fraction: fraction of real tokens dropped by the capacity limit.
    """

    expert_index: torch.Tensor
    gate: torch.Tensor
    keep: torch.Tensor
    router_logits: torch.Tensor | None
    aux_loss: torch.Tensor
    expert_load: torch.Tensor
    dropped_fraction: torch.Tensor


def load_balancing_loss(
    router_probs: torch.Tensor,
    expert_index: torch.Tensor,
    valid: torch.Tensor,
    loss_type: str,
    fractions: torch.Tensor | None = None,
) -> torch.Tensor:
    """Balance loss over the real tokens (``valid``) of one MoE block (``fractions``: the f_j below, where the
    caller has them already: ``route_tokens`` shares its expert load).

    ``switch``: ``m · Σ_j f_j · P_j`` (paper 002 §3.2, α applied by the caller), f_j the fraction of tokens
    whose top-1 expert is j, P_j the mean router probability of j; equals 1 for uniform routing, its minimum.
    ``kl_uniform``: ``KL(u ‖ q) = Σ_j u_j log(u_j / q_j)`` with u uniform and q the mean router
    distribution (paper 003 eq. 4-5); 0 for a uniform q.
    """
    num_experts = router_probs.shape[-1]
    weights = valid.to(router_probs.dtype)
    num_tokens = weights.sum().clamp(min=1.0)
    mean_probs = (weights @ router_probs) / num_tokens
    if loss_type == "switch":
        if fractions is None:
            fractions = _token_fractions(expert_index, weights, num_experts, num_tokens)
        return num_experts * (fractions * mean_probs).sum()
    if loss_type == "kl_uniform":
        divergence = (
            -math.log(num_experts) - torch.log(mean_probs.clamp(min=torch.finfo(mean_probs.dtype).tiny)).mean()
        )
        # A block that saw no real token (a fully padded batch) has no distribution to balance.
        return divergence * (weights.sum() > 0).to(divergence.dtype)
    raise ValueError(f"`router_aux_loss_type` must be 'switch' or 'kl_uniform', got {loss_type!r}.")


def _one_hot(expert_index: torch.Tensor, num_experts: int) -> torch.Tensor:
    """``F.one_hot`` as a comparison: equal values, but without one_hot's run-time range assert, an op that
    litert-torch (the TFLite exporter) has no lowering for."""
    return (expert_index.unsqueeze(-1) == torch.arange(num_experts, device=expert_index.device)).long()


def _token_fractions(expert_index: torch.Tensor, weights: torch.Tensor, num_experts: int, num_tokens) -> torch.Tensor:
    """Fraction of the (weighted) tokens whose top-1 choice is each expert."""
    if exporting():
        # bincount's output size is data-dependent, which export cannot express.
        counts = (_one_hot(expert_index, num_experts).to(weights.dtype) * weights.unsqueeze(-1)).sum(0)
    else:
        counts = torch.bincount(expert_index, weights=weights, minlength=num_experts).to(weights.dtype)
    return counts / num_tokens


def _capacity_keep(expert_index: torch.Tensor, valid: torch.Tensor, num_experts: int, capacity_factor: float):
    """Keep the first ``ceil(capacity_factor · real_tokens / num_experts)`` tokens of each expert, in order.

    Tokens are ranked within their expert by position (Switch Transformers), so the overflow that is
    dropped is exactly each expert's last ``count - capacity`` tokens.
    """
    capacity = torch.ceil(capacity_factor * valid.sum() / num_experts)
    assignment = _one_hot(expert_index, num_experts) * valid.unsqueeze(-1)
    rank = (assignment.cumsum(0) * assignment).sum(-1) - 1
    return valid & (rank < capacity)


def route_tokens(
    expert_index: torch.Tensor,
    gate: torch.Tensor,
    router_logits: torch.Tensor | None,
    router_probs: torch.Tensor | None,
    valid: torch.Tensor,
    num_experts: int,
    capacity_factor: float | None,
    aux_loss_type: str,
) -> RoutingDecision:
    """Apply the capacity limit to a top-1 choice and compute the balance loss and load statistics."""
    valid = valid.to(torch.bool)
    weights = valid.to(torch.float32)
    num_real = weights.sum().clamp(min=1.0)
    expert_load = _token_fractions(expert_index, weights, num_experts, num_real)
    if router_probs is None:
        aux_loss = torch.zeros((), device=expert_index.device)
    else:
        aux_loss = load_balancing_loss(router_probs, expert_index, valid, aux_loss_type, fractions=expert_load)
    if capacity_factor is None:  # nothing is dropped
        keep, dropped_fraction = valid, torch.zeros((), device=expert_index.device)
    else:
        keep = _capacity_keep(expert_index, valid, num_experts, capacity_factor)
        dropped_fraction = (valid & ~keep).sum() / num_real
    return RoutingDecision(
        expert_index=expert_index,
        gate=gate,
        keep=keep,
        router_logits=router_logits,
        aux_loss=aux_loss,
        expert_load=expert_load.detach(),
        dropped_fraction=dropped_fraction.detach(),
    )


def _rename_legacy_router_keys(module, state_dict, prefix, *args) -> None:
    """``load_state_dict`` pre-hook: a router's ``classifier.*`` keys of before 0.2 are its ``gate.*``."""
    for name in ("weight", "bias"):
        legacy_key = f"{prefix}classifier.{name}"
        if legacy_key in state_dict and f"{prefix}gate.{name}" not in state_dict:
            state_dict[f"{prefix}gate.{name}"] = state_dict.pop(legacy_key)


class TopOneRouter(nn.Module):
    """Learned gate ``p = softmax(W x + b)`` in float32; top-1 choice ``k = argmax p``, weight ``p_k``.

    The linear map is named ``gate`` (as Mixtral names its router's). Checkpoints written before 0.2 call it
    ``classifier``, a name PEFT treats as a task head (``modules_to_save=["classifier"]`` for ``SEQ_CLS``),
    which made every router trainable and saved it in each adapter; ``from_pretrained`` renames those keys
    through transformers' own renaming on each line (``checkpoint_keys``), and for ``load_state_dict`` the
    router registers torch's load-state-dict pre-hook that does the same.
    """

    def __init__(self, hidden_size: int, num_experts: int):
        super().__init__()
        self.gate = nn.Linear(hidden_size, num_experts)
        self.register_load_state_dict_pre_hook(_rename_legacy_router_keys)

    def forward(self, hidden_states: torch.Tensor, input_ids: torch.Tensor | None):
        router_logits = self.gate(hidden_states).float()
        router_probs = torch.softmax(router_logits, dim=-1)
        gate, expert_index = router_probs.max(dim=-1)
        return expert_index, gate, router_logits, router_probs


def hash_routing_table(vocab_size: int, num_experts: int, hash_seed: int) -> torch.Tensor:
    """A balanced random partition of the vocabulary: each expert gets ``vocab / m`` token ids."""
    generator = torch.Generator().manual_seed(hash_seed)
    permutation = torch.randperm(vocab_size, generator=generator)
    table = torch.empty(vocab_size, dtype=torch.long)
    table[permutation] = torch.arange(vocab_size) % num_experts
    return table


class HashRouter(nn.Module):
    """Fixed random hash of the token id → expert (Roller et al., 2021; paper 002 appendix B).

    The table is generated from ``hash_seed`` and saved with the weights, so it never changes between
    library versions; a checkpoint without it gets the same table back from the seed.
    """

    def __init__(self, vocab_size: int, num_experts: int, hash_seed: int):
        super().__init__()
        self.table_arguments = (vocab_size, num_experts, hash_seed)
        self.register_buffer("token_to_expert", hash_routing_table(*self.table_arguments))

    def forward(self, hidden_states: torch.Tensor, input_ids: torch.Tensor | None):
        if input_ids is None:
            raise ValueError("Hash routing picks experts from token ids: pass `input_ids`, not `inputs_embeds`.")
        expert_index = self.token_to_expert[input_ids]
        return expert_index, torch.ones_like(expert_index, dtype=torch.float32), None, None


def build_router(config, hidden_size: int, num_experts: int) -> nn.Module:
    if config.router_type == "hash":
        return HashRouter(config.vocab_size, num_experts, config.hash_seed)
    return TopOneRouter(hidden_size, num_experts)


class ExpertLinear(nn.Module):
    """``num_experts`` linear maps stored as one ``[num_experts, out, in]`` weight (for MoE attention), computed by
    the expert implementation ``config.moe_implementation`` selects (``moe_implementations``)."""

    def __init__(self, config, num_experts: int, in_features: int, out_features: int):
        super().__init__()
        self.config = config
        self.num_experts = num_experts
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(num_experts, out_features))

    def extra_repr(self) -> str:
        # Shown in PEFT's "Target module ... is not supported" when this is named in `target_modules`.
        return (
            f"num_experts={self.num_experts}, in_features={self.in_features}, out_features={self.out_features}; "
            "stacked [experts, out, in] weight: adapt it with LoRA `target_parameters=['<name>.weight']`"
        )

    def forward(self, inputs: torch.Tensor, dispatch: ExpertDispatch) -> torch.Tensor:
        implementation = ALL_MOE_IMPLEMENTATIONS.get_interface(self.config.moe_implementation)
        return implementation.linear(self, inputs, dispatch)


class MoEExperts(nn.Module):
    """``config.num_experts`` standard FFNs (``hidden → expert_intermediate_size → hidden``) stored as batched
    weights, computed by the expert implementation ``config.moe_implementation`` selects (``moe_implementations``).

    ``fc1_weight`` is ``[E, intermediate, hidden]`` and ``fc2_weight`` ``[E, hidden, intermediate]``
    (PyTorch's ``[out, in]`` per expert), targetable by PEFT's parameter targeting. ``fused_activation``: the name
    under which oneDNN's GEMM epilogue computes ``hidden_act`` exactly (``FUSED_ACTIVATIONS``), else ``None``.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_experts = config.num_experts
        self.hidden_size = config.hidden_size
        hidden_act, intermediate_size = config.hidden_act, config.expert_intermediate_size
        self.fused_activation = hidden_act if isinstance(hidden_act, str) and hidden_act in FUSED_ACTIVATIONS else None
        self.fc1_weight = nn.Parameter(torch.empty(self.num_experts, intermediate_size, self.hidden_size))
        self.fc1_bias = nn.Parameter(torch.zeros(self.num_experts, intermediate_size))
        self.fc2_weight = nn.Parameter(torch.empty(self.num_experts, self.hidden_size, intermediate_size))
        self.fc2_bias = nn.Parameter(torch.zeros(self.num_experts, self.hidden_size))
        self.act = ACT2FN[hidden_act]

    def extra_repr(self) -> str:
        # Shown in PEFT's "Target module ... is not supported" when `experts` is named in `target_modules`.
        return (
            f"num_experts={self.num_experts}, hidden_size={self.hidden_size}, "
            f"intermediate_size={self.fc1_weight.shape[1]}; stacked [experts, out, in] weights: adapt them with "
            "LoRA `target_parameters=['experts.fc1_weight', 'experts.fc2_weight']`"
        )

    def forward(self, inputs: torch.Tensor, dispatch: ExpertDispatch) -> torch.Tensor:
        return ALL_MOE_IMPLEMENTATIONS.get_interface(self.config.moe_implementation).ffn(self, inputs, dispatch)


def route(
    router: nn.Module,
    hidden_states: torch.Tensor,
    token_mask: torch.Tensor,
    input_ids: torch.Tensor | None,
    num_experts: int,
    capacity_factor: float | None,
    aux_loss_type: str,
) -> tuple[RoutingDecision, ExpertDispatch]:
    """Route the ``[batch, seq, hidden]`` tokens of one MoE block and group them by expert."""
    flat = hidden_states.reshape(-1, hidden_states.shape[-1])
    flat_ids = None if input_ids is None else input_ids.reshape(-1)
    expert_index, gate, router_logits, router_probs = router(flat, flat_ids)
    decision = route_tokens(
        expert_index,
        gate,
        router_logits,
        router_probs,
        token_mask.reshape(-1),
        num_experts,
        capacity_factor,
        aux_loss_type,
    )
    return decision, ExpertDispatch(decision, num_experts)


class MoEFeedForward(nn.Module):
    """Top-1 MoE FFN block: ``p_k(x) · FFN_k(x)`` (paper 002 §3.2; paper 003 eq. 1-3)."""

    def __init__(self, config):
        super().__init__()
        self.num_experts = config.num_experts
        self.capacity_factor = config.capacity_factor
        self.eval_capacity_factor = config.eval_capacity_factor
        self.aux_loss_type = config.router_aux_loss_type
        self.router = build_router(config, config.hidden_size, config.num_experts)
        self.experts = MoEExperts(config)

    def forward(
        self, hidden_states: torch.Tensor, token_mask: torch.Tensor, input_ids: torch.Tensor | None
    ) -> tuple[torch.Tensor, RoutingDecision]:
        capacity_factor = self.capacity_factor if self.training else self.eval_capacity_factor
        decision, dispatch = route(
            self.router, hidden_states, token_mask, input_ids, self.num_experts, capacity_factor, self.aux_loss_type
        )
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        outputs = self.experts(flat, dispatch) * decision.gate.unsqueeze(-1).to(flat.dtype)
        return outputs.view_as(hidden_states), decision


def summarize_routing(
    decisions: list[RoutingDecision], config, batch: int, seq: int, output_router_logits: bool
) -> dict[str, torch.Tensor | tuple | None]:
    """The routing fields of a model output from every MoE block's decision (empty for a dense model)."""
    if not decisions:
        return {}
    aux_loss = config.router_aux_loss_coef * torch.stack([decision.aux_loss for decision in decisions]).mean()
    router_logits = None
    if output_router_logits and config.router_type == "top1":
        router_logits = tuple(decision.router_logits.view(batch, seq, -1) for decision in decisions)
    loads = [decision.expert_load for decision in decisions]
    # MHA and FFN blocks may have different expert counts: pad loads to the widest for one tensor.
    width = max(load.shape[0] for load in loads)
    return {
        "aux_loss": aux_loss,
        "router_logits": router_logits,
        "expert_load": torch.stack([F.pad(load, (0, width - load.shape[0])) for load in loads]),
        "dropped_token_fraction": torch.stack([decision.dropped_fraction for decision in decisions]),
    }
