"""The one top-1 mixture-of-experts layer shared by MiniMoE and MoE-BERT (DESIGN.md §2.4).

Routing (``TopOneRouter`` or ``HashRouter``) decides one expert per real token; ``route_tokens`` applies
the capacity limit and computes the balance loss and load statistics; ``ExpertDispatch`` groups the kept
tokens by expert so that each expert runs once over a contiguous slice. Padding tokens are never routed:
they take no capacity, do not count in the balance loss and get a zero MoE output.

Dispatch runs each expert once over its own tokens, a loop over *experts* (never tokens): in eager mode
one stable argsort of the expert ids plus a bincount sort the kept tokens by expert, one gather brings them
into that order, each expert multiplies its contiguous slice and one scatter writes the results back; under
``torch.export`` / ``torch.compile`` a fixed ``for e in range(num_experts)`` loop selects each expert's tokens
with ``nonzero`` instead, so the traced program stays correct for any routing. On CUDA, and on CPU in training,
every expert's product runs in one ``torch._grouped_mm`` call instead (``grouped_gemm``); at inference on CPU the
experts multiply with weights packed once for oneDNN (``packed_weights``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers.activations import ACT2FN

from .grouped_gemm import grouped_gemm_applies, grouped_linear_rows
from .packed_weights import FUSED_ACTIVATIONS, packed_expert_weights, packed_linear

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
    if _exporting():
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
    (``SparseBertPreTrainedModel.legacy_checkpoint_key_mapping``), and for ``load_state_dict`` the router
    registers torch's load-state-dict pre-hook that does the same.
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


def _exporting() -> bool:
    return torch.compiler.is_exporting() or torch.compiler.is_compiling() or torch.jit.is_tracing()


class ExpertDispatch:
    """The kept tokens grouped by expert for a ``RoutingDecision``, found once for every expert matrix that
    follows (MoE attention applies four)."""

    def __init__(self, decision: RoutingDecision, num_experts: int):
        self.num_experts = num_experts
        self.num_tokens = decision.expert_index.shape[0]
        self.gate = decision.gate
        target = torch.where(decision.keep, decision.expert_index, num_experts)
        # Each token's expert, ``num_experts`` for a token no expert runs: the export hook. The batched form
        # that exported graphs use (``compact_bert.export.moe_export_form``) reads it instead of the grouping.
        self.target = target
        self.exporting = _exporting()
        self._grouping: tuple[torch.Tensor, list[int]] | None = None

    @property
    def grouping(self) -> tuple[torch.Tensor, list[int]]:
        """The kept tokens' positions sorted by expert (stable: in token order within an expert) and each expert's
        token count. Found on first use: the batched export form never asks, and traced eagerly it would only slow
        the export down. (Not ``functools.cached_property``: on Python 3.11 it takes an ``RLock``, which
        ``torch.compile`` cannot trace.)"""
        if self._grouping is None:
            order = torch.argsort(self.target, stable=True)
            counts = torch.bincount(self.target, minlength=self.num_experts + 1).tolist()
            self._grouping = order[: sum(counts[: self.num_experts])], counts[: self.num_experts]
        return self._grouping

    def run(
        self, inputs: torch.Tensor, expert_fn: Callable[[torch.Tensor, int], torch.Tensor], out_features: int
    ) -> torch.Tensor:
        """``expert_fn(rows, expert)`` applied to each expert's rows of ``inputs`` ``[T, in]``; dropped and
        padding tokens get zeros.

        Eager: one gather puts the kept rows in expert order, each expert multiplies its contiguous slice, and one
        scatter puts the results back (two index operations for any number of experts). Traced (compile, export):
        a fixed loop over every expert selects its rows with ``nonzero``, which stays right for any routing."""
        outputs = inputs.new_zeros(self.num_tokens, out_features)
        if self.exporting:
            for expert in range(self.num_experts):
                positions = (self.target == expert).nonzero().squeeze(-1)
                expert_outputs = expert_fn(inputs.index_select(0, positions), expert)
                outputs.index_add_(0, positions, expert_outputs.to(outputs.dtype))
            return outputs
        order, counts = self.grouping
        slices = inputs.index_select(0, order).split(counts)
        results = [expert_fn(rows, expert) for expert, rows in enumerate(slices) if rows.shape[0] > 0]
        if results:
            outputs.index_copy_(0, order, torch.cat(results).to(outputs.dtype))
        return outputs

    def run_grouped(
        self,
        inputs: torch.Tensor,
        grouped_fn: Callable[[torch.Tensor, list[int], torch.Tensor], torch.Tensor],
        out_features: int,
    ) -> torch.Tensor:
        """``grouped_fn(rows, counts, row_experts)`` applied once to the kept rows of ``inputs`` sorted by expert
        (``counts`` rows per expert, ``row_experts`` each row's expert): the grouped-GEMM form of ``run``."""
        outputs = inputs.new_zeros(self.num_tokens, out_features)
        order, counts = self.grouping
        if order.numel() > 0:
            results = grouped_fn(inputs.index_select(0, order), counts, self.target.index_select(0, order))
            outputs.index_copy_(0, order, results.to(outputs.dtype))
        return outputs


class ExpertLinear(nn.Module):
    """``num_experts`` linear maps stored as one ``[num_experts, out, in]`` weight (for MoE attention).

    ``pack_inference_weights``: in eval mode without gradients, multiply with copies of the expert matrices
    packed once for the CPU's GEMM library (``packed_weights``); the outputs are the same.
    """

    def __init__(self, num_experts: int, in_features: int, out_features: int, pack_inference_weights: bool = True):
        super().__init__()
        self.num_experts = num_experts
        self.in_features = in_features
        self.out_features = out_features
        self.pack_inference_weights = pack_inference_weights
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(num_experts, out_features))

    def extra_repr(self) -> str:
        # Shown in PEFT's "Target module ... is not supported" when this is named in `target_modules`.
        return (
            f"num_experts={self.num_experts}, in_features={self.in_features}, out_features={self.out_features}; "
            "stacked [experts, out, in] weight: adapt it with LoRA `target_parameters=['<name>.weight']`"
        )

    def forward(self, inputs: torch.Tensor, dispatch: ExpertDispatch) -> torch.Tensor:
        packed = packed_expert_weights(self.weight, self, self.pack_inference_weights)
        if packed is not None:
            biases = self.bias.unbind(0)
            return dispatch.run(
                inputs, lambda rows, expert: packed_linear(rows, packed[expert], biases[expert]), self.out_features
            )
        if grouped_gemm_applies(self.weight):
            return dispatch.run_grouped(inputs, self._grouped_linear, self.out_features)
        # One unbind per call, not weight[expert] per expert: the backward of each indexing writes a zero gradient
        # the size of all experts (64 experts: 64 full-size writes per step); unbind's backward stacks once.
        weights, biases = self.weight.unbind(0), self.bias.unbind(0)
        return dispatch.run(
            inputs, lambda rows, expert: F.linear(rows, weights[expert], biases[expert]), self.out_features
        )

    def _grouped_linear(self, rows: torch.Tensor, counts: list[int], row_experts: torch.Tensor) -> torch.Tensor:
        return grouped_linear_rows(rows, self.weight, self.bias, counts, row_experts)


class MoEExperts(nn.Module):
    """``num_experts`` standard FFNs (``in → intermediate → in``) stored as batched weights.

    ``fc1_weight`` is ``[E, intermediate, hidden]`` and ``fc2_weight`` ``[E, hidden, intermediate]``
    (PyTorch's ``[out, in]`` per expert), targetable by PEFT's parameter targeting.
    ``pack_inference_weights``: as in ``ExpertLinear``; the first GEMM also applies ``hidden_act`` in its
    epilogue where oneDNN has the same function (``FUSED_ACTIVATIONS``).
    """

    def __init__(
        self,
        num_experts: int,
        hidden_size: int,
        intermediate_size: int,
        hidden_act: str,
        pack_inference_weights: bool = True,
    ):
        super().__init__()
        self.num_experts = num_experts
        self.hidden_size = hidden_size
        self.pack_inference_weights = pack_inference_weights
        self.fused_activation = hidden_act if isinstance(hidden_act, str) and hidden_act in FUSED_ACTIVATIONS else None
        self.fc1_weight = nn.Parameter(torch.empty(num_experts, intermediate_size, hidden_size))
        self.fc1_bias = nn.Parameter(torch.zeros(num_experts, intermediate_size))
        self.fc2_weight = nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size))
        self.fc2_bias = nn.Parameter(torch.zeros(num_experts, hidden_size))
        self.act = ACT2FN[hidden_act]

    def extra_repr(self) -> str:
        # Shown in PEFT's "Target module ... is not supported" when `experts` is named in `target_modules`.
        return (
            f"num_experts={self.num_experts}, hidden_size={self.hidden_size}, "
            f"intermediate_size={self.fc1_weight.shape[1]}; stacked [experts, out, in] weights: adapt them with "
            "LoRA `target_parameters=['experts.fc1_weight', 'experts.fc2_weight']`"
        )

    def forward(self, inputs: torch.Tensor, dispatch: ExpertDispatch) -> torch.Tensor:
        packed_fc1 = packed_expert_weights(self.fc1_weight, self, self.pack_inference_weights)
        packed_fc2 = None
        if packed_fc1 is not None:  # a LoRA-computed fc1 runs the plain path: no fc2 copy for nothing
            packed_fc2 = packed_expert_weights(self.fc2_weight, self, self.pack_inference_weights)
        if packed_fc1 is not None and packed_fc2 is not None:
            packed = list(zip(packed_fc1, self.fc1_bias.unbind(0), packed_fc2, self.fc2_bias.unbind(0)))
            return dispatch.run(inputs, lambda rows, expert: self._packed_ffn(rows, *packed[expert]), self.hidden_size)
        if grouped_gemm_applies(self.fc1_weight):
            return dispatch.run_grouped(inputs, self._grouped_ffn, self.hidden_size)

        # One unbind per call, not fc1_weight[expert] per expert: see ExpertLinear.forward.
        fc1_weights, fc1_biases = self.fc1_weight.unbind(0), self.fc1_bias.unbind(0)
        fc2_weights, fc2_biases = self.fc2_weight.unbind(0), self.fc2_bias.unbind(0)

        def expert_ffn(rows: torch.Tensor, expert: int) -> torch.Tensor:
            hidden = self.act(F.linear(rows, fc1_weights[expert], fc1_biases[expert]))
            return F.linear(hidden, fc2_weights[expert], fc2_biases[expert])

        return dispatch.run(inputs, expert_ffn, self.hidden_size)

    def _grouped_ffn(self, rows: torch.Tensor, counts: list[int], row_experts: torch.Tensor) -> torch.Tensor:
        hidden = self.act(grouped_linear_rows(rows, self.fc1_weight, self.fc1_bias, counts, row_experts))
        return grouped_linear_rows(hidden, self.fc2_weight, self.fc2_bias, counts, row_experts)

    def _packed_ffn(self, rows: torch.Tensor, fc1, fc1_bias, fc2, fc2_bias) -> torch.Tensor:
        """One expert's FFN on its packed matrices (and its bias vectors)."""
        if self.fused_activation is not None:
            hidden = packed_linear(rows, fc1, fc1_bias, self.fused_activation)
        else:
            hidden = self.act(packed_linear(rows, fc1, fc1_bias))
        return packed_linear(hidden, fc2, fc2_bias)


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
        self.experts = MoEExperts(
            config.num_experts,
            config.hidden_size,
            config.expert_intermediate_size,
            config.hidden_act,
            config.pack_inference_weights,
        )

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
