"""The MoE layer of the sparse architecture: dispatch, capacity, routing semantics, balance losses, and the experts
implementations (transformers' experts interface on 5.x, the static export form) against the eager loop."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModelForSequenceClassification, SwitchTransformersConfig
from transformers.models.switch_transformers.modeling_switch_transformers import (
    SwitchTransformersTop1Router,
    load_balancing_loss_func,
)

from compact_bert.configuration import MiniMoEConfig
from compact_bert.models.minimoe import modeling_minimoe
from tests.conftest import random_batch, tiny_configs

load_balancing_loss = modeling_minimoe.load_balancing_loss
try:
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
except ImportError:  # transformers 4.57: no experts interface
    ALL_EXPERTS_FUNCTIONS = None
needs_experts_interface = pytest.mark.skipif(
    ALL_EXPERTS_FUNCTIONS is None, reason="this transformers line has no experts interface (transformers 5 has)"
)


def _layer(**fields) -> modeling_minimoe.MiniMoESparseFeedForward:
    config = MiniMoEConfig(hidden_size=16, num_attention_heads=2, intermediate_size=24, vocab_size=64, **fields)
    layer = modeling_minimoe.MiniMoESparseFeedForward(config)
    for parameter in layer.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    return layer


def _naive_moe(layer, hidden: torch.Tensor, mask: torch.Tensor, input_ids, capacity_factor):
    """One token at a time, in order, with Python counters: the semantics spelled out."""
    flat = hidden.reshape(-1, hidden.shape[-1])
    ids = None if input_ids is None else input_ids.reshape(-1)
    valid = mask.reshape(-1).bool()
    num_experts = layer.experts.num_experts
    capacity = math.inf if capacity_factor is None else math.ceil(capacity_factor * int(valid.sum()) / num_experts)
    taken = [0] * num_experts
    experts = layer.experts
    outputs = torch.zeros_like(flat)
    for token in range(flat.shape[0]):
        if not valid[token]:
            continue
        if hasattr(layer.router, "token_to_expert"):
            expert, gate = int(layer.router.token_to_expert[ids[token]]), 1.0
        else:
            probs = torch.softmax(layer.router.gate(flat[token]).float(), dim=-1)
            expert, gate = int(probs.argmax()), probs.max()
        if taken[expert] >= capacity:
            continue
        taken[expert] += 1
        inner = experts.act_fn(F.linear(flat[token], experts.up_proj[expert], experts.up_proj_bias[expert]))
        outputs[token] = gate * F.linear(inner, experts.down_proj[expert], experts.down_proj_bias[expert])
    return outputs.view_as(hidden)


@pytest.mark.parametrize("router_type", ["top1", "hash"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("with_grad", [True, False])
def test_vectorized_dispatch_equals_per_token_reference(router_type, training, with_grad):
    layer = _layer(num_experts=4, router_type=router_type, capacity_factor=0.75, eval_capacity_factor=None)
    layer.train(training)
    hidden = torch.randn(3, 10, 16)
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[2, 6:] = 0
    input_ids = torch.randint(0, 64, (3, 10))
    with torch.set_grad_enabled(with_grad):
        outputs, decision = layer(hidden, mask.bool(), input_ids)
        expected = _naive_moe(layer, hidden, mask, input_ids, 0.75 if training else None)
    torch.testing.assert_close(outputs, expected, atol=1e-5, rtol=1e-5)
    if training:
        assert decision.dropped_fraction > 0


def test_eval_output_of_a_token_does_not_depend_on_its_batch_mates():
    layer = _layer(num_experts=4).eval()
    alone = torch.randn(1, 6, 16)
    crowd = torch.cat([alone, torch.randn(5, 6, 16)])
    with torch.no_grad():
        alone_out, _ = layer(alone, torch.ones(1, 6, dtype=torch.bool), None)
        crowd_out, decision = layer(crowd, torch.ones(6, 6, dtype=torch.bool), None, output_router_stats=True)
    torch.testing.assert_close(crowd_out[:1], alone_out)
    assert decision.dropped_fraction == 0


def test_inference_routing_computes_only_the_choice_unless_asked_for_statistics():
    """Eval mode pays for the routing alone: no balance loss, load or drop statistics unless asked; asked,
    they equal training mode's on the same tokens, and the outputs are the same either way."""
    layer = _layer(num_experts=4).eval()
    hidden, mask = torch.randn(2, 6, 16), torch.tensor([[1] * 6, [1] * 4 + [0] * 2], dtype=torch.bool)
    with torch.no_grad():
        plain_out, plain = layer(hidden, mask, None)
        asked_out, asked = layer(hidden, mask, None, output_router_stats=True)
        _, trained = layer.train()(hidden, mask, None)
    assert plain.aux_loss is None and plain.expert_load is None and plain.dropped_fraction is None
    torch.testing.assert_close(plain_out, asked_out, rtol=0, atol=0)
    torch.testing.assert_close(plain.weight, asked.weight, rtol=0, atol=0)
    torch.testing.assert_close(asked.aux_loss, trained.aux_loss)
    torch.testing.assert_close(asked.expert_load, trained.expert_load)
    assert float(asked.expert_load.sum()) == pytest.approx(1.0)


def test_capacity_drops_exactly_each_experts_overflow_and_reports_it():
    layer = _layer(num_experts=4, capacity_factor=1.0).train()
    with torch.no_grad():
        layer.router.gate.weight.zero_()
        layer.router.gate.bias.copy_(torch.tensor([5.0, 0.0, 0.0, 0.0]))  # every token prefers expert 0
    hidden = torch.randn(1, 12, 16)
    outputs, decision = layer(hidden, torch.ones(1, 12, dtype=torch.bool), None)
    capacity = math.ceil(1.0 * 12 / 4)
    assert (decision.weight != 0).tolist() == [True] * capacity + [False] * (12 - capacity)
    assert decision.dropped_fraction.item() == pytest.approx(9 / 12)
    assert torch.all(outputs[0, capacity:] == 0)
    assert decision.expert_load.tolist() == [1.0, 0.0, 0.0, 0.0]


def test_capacity_semantics_match_transformers_switch_router():
    """Same logits → same top-1 expert, same gate probability, same kept tokens (one group)."""
    num_experts, tokens, capacity = 4, 20, 3
    switch_config = SwitchTransformersConfig(
        d_model=16,
        hidden_size=16,
        num_experts=num_experts,
        expert_capacity=capacity,
        router_jitter_noise=0.0,
        router_bias=False,
        router_dtype="float32",
    )
    switch_router = SwitchTransformersTop1Router(switch_config).eval()
    # capacity_factor chosen so that ceil(cf * tokens / experts) == capacity
    layer = _layer(num_experts=num_experts, capacity_factor=capacity * num_experts / tokens).train()
    with torch.no_grad():
        layer.router.gate.weight.copy_(switch_router.classifier.weight)
        layer.router.gate.bias.zero_()
    hidden = torch.randn(1, tokens, 16)
    switch_assignment, switch_gate, _ = switch_router(hidden)
    _, decision = layer(hidden, torch.ones(1, tokens, dtype=torch.bool), None)
    kept_by_switch = switch_assignment.sum(-1).bool().view(-1)
    kept = decision.weight != 0
    assert kept.tolist() == kept_by_switch.tolist()
    torch.testing.assert_close(decision.weight[kept], switch_gate.view(-1)[kept_by_switch])
    switch_expert = switch_assignment.argmax(-1).view(-1)
    assert decision.expert_index[kept].tolist() == switch_expert[kept_by_switch].tolist()


def test_switch_balance_loss_matches_transformers_for_unpadded_tokens():
    logits = torch.randn(1, 30, 4)
    probs = torch.softmax(logits, dim=-1)
    expert_index = probs.argmax(-1)
    ours = load_balancing_loss(probs.view(-1, 4), expert_index.view(-1), torch.ones(30, dtype=torch.bool), "switch")
    torch.testing.assert_close(ours, load_balancing_loss_func(probs, expert_index))


def test_balance_losses_equal_numpy_and_ignore_padding():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(5), size=40)
    valid = rng.random(40) > 0.3
    index = probs.argmax(-1)
    real = probs[valid]
    fractions = np.bincount(index[valid], minlength=5) / valid.sum()
    expected_switch = 5 * np.sum(fractions * real.mean(0))
    mean_probs = real.mean(0)
    expected_kl = np.sum((1 / 5) * np.log((1 / 5) / mean_probs))
    args = (torch.tensor(probs, dtype=torch.float32), torch.tensor(index), torch.tensor(valid))
    assert load_balancing_loss(*args, "switch").item() == pytest.approx(expected_switch, rel=1e-5)
    assert load_balancing_loss(*args, "kl_uniform").item() == pytest.approx(expected_kl, rel=1e-4, abs=1e-6)


def test_balance_losses_are_minimal_for_uniform_routing():
    uniform = torch.full((8, 4), 0.25)
    index = torch.arange(8) % 4
    valid = torch.ones(8, dtype=torch.bool)
    assert load_balancing_loss(uniform, index, valid, "switch").item() == pytest.approx(1.0)
    assert load_balancing_loss(uniform, index, valid, "kl_uniform").item() == pytest.approx(0.0, abs=1e-6)
    generator = torch.Generator().manual_seed(3)
    for _ in range(20):
        probs = torch.softmax(3 * torch.randn(8, 4, generator=generator), dim=-1)
        skewed_index = probs.argmax(-1)
        # Skewed routing costs strictly more than uniform routing, by exactly the amounts the formulas give.
        mean_probs = probs.double().mean(0)
        fractions = torch.bincount(skewed_index, minlength=4).double() / 8
        expected_switch = 4 * float((fractions * mean_probs).sum())
        expected_kl = float((0.25 * torch.log(0.25 / mean_probs)).sum())
        switch = load_balancing_loss(probs, skewed_index, valid, "switch").item()
        kl = load_balancing_loss(probs, skewed_index, valid, "kl_uniform").item()
        assert switch == pytest.approx(expected_switch, rel=1e-5) and switch > 1.0
        assert kl == pytest.approx(expected_kl, rel=1e-4) and kl > 1e-3


def test_hash_routing_is_deterministic_and_balanced():
    table = modeling_minimoe.hash_routing_table
    first, second, other_seed = table(1000, 4, 11), table(1000, 4, 11), table(1000, 4, 12)
    assert torch.equal(first, second)
    assert not torch.equal(first, other_seed)
    assert torch.bincount(first).tolist() == [250] * 4
    layer = _layer(num_experts=4, router_type="hash", hash_seed=11).eval()
    ids = torch.tensor([[5, 17, 5, 999 % 64]])
    routing = layer.router(torch.randn(1, 4, 16), torch.ones(1, 4, dtype=torch.bool), ids)
    assert routing.expert_index[0] == routing.expert_index[2] and routing.router_logits is None
    assert torch.all(routing.weight == 1)


def test_hash_routing_of_a_token_ignores_context():
    layer = _layer(num_experts=4, router_type="hash").eval()
    ids = torch.tensor([[3, 9, 3, 41]])
    _, decision = layer(torch.randn(1, 4, 16), torch.ones(1, 4, dtype=torch.bool), ids, output_router_stats=True)
    assert decision.expert_index[0] == decision.expert_index[2]
    assert decision.aux_loss.item() == 0.0


def _train_step(model, batch, labels) -> tuple:
    model.zero_grad()
    torch.manual_seed(5)
    outputs = model(**batch, labels=labels)
    outputs.loss.backward()
    gradients = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return outputs.loss.detach(), outputs.dropped_token_fraction, gradients


@needs_experts_interface
@pytest.mark.parametrize("implementation", ["grouped_mm", "batched_mm", "onednn"])
@pytest.mark.parametrize("config_id", ["minimoe", "minimoe_moe_attention", "minimoe_hash", "moe_bert"])
def test_every_experts_implementation_equals_the_eager_loop_forward_and_backward(config_id, implementation):
    """transformers' experts interface runs our experts under every implementation (its ``grouped_mm`` and
    ``batched_mm``, compact-bert's registered ``onednn``): the same loss, routing and gradients as the eager loop, in
    training with the capacity limit dropping tokens (their weight is 0) and padding present, top-1 and hash routing."""
    config = copy.deepcopy(tiny_configs()[config_id])
    config.capacity_factor = 1.0
    model = AutoModelForSequenceClassification.from_config(config).train()
    batch, labels = random_batch(), torch.tensor([0, 1, 0])
    model.set_experts_implementation("eager")
    loop_loss, loop_dropped, loop_grads = _train_step(model, batch, labels)
    model.set_experts_implementation(implementation)
    loss, dropped, grads = _train_step(model, batch, labels)
    assert dropped.max() > 0
    torch.testing.assert_close(dropped, loop_dropped, rtol=0, atol=0)
    torch.testing.assert_close(loss, loop_loss, rtol=1e-5, atol=1e-6)
    assert grads.keys() == loop_grads.keys() and any("experts" in name for name in grads)
    for name in loop_grads:
        torch.testing.assert_close(grads[name], loop_grads[name], rtol=1e-4, atol=1e-6, msg=name)


@needs_experts_interface
def test_a_function_registered_in_the_experts_interface_runs_the_experts():
    calls = []
    eager = modeling_minimoe.MiniMoEExperts.forward.__wrapped__

    def recording(module, hidden_states, top_k_index, top_k_weights):
        calls.append(top_k_index.shape)
        return eager(module, hidden_states, top_k_index, top_k_weights)

    ALL_EXPERTS_FUNCTIONS.register("recording_for_test", recording)
    model = AutoModelForSequenceClassification.from_config(tiny_configs()["minimoe"]).eval()
    # the recording function runs the eager experts: compared with the eager path (the default, the grouped GEMM on
    # CPUs that have it, rounds differently in the last bits)
    model.set_experts_implementation("eager")
    with torch.no_grad():
        expected = model(**random_batch()).logits
        model.set_experts_implementation("recording_for_test")
        got = model(**random_batch()).logits
    assert len(calls) == tiny_configs()["minimoe"].num_hidden_layers
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("form", ["routed", "static", "capacity"])
@pytest.mark.parametrize("config_id", ["minimoe", "minimoe_moe_attention", "moe_bert"])
def test_each_export_form_equals_the_loop_and_is_swapped_in_only_inside_the_block(config_id, form):
    """The forms exported graphs use (routed for ONNX; for LiteRT static, or capacity where the FFN router has an
    eval capacity) give the eager loop's outputs, padding and capacity drops included; ``export_expert_form`` swaps
    them in for the block and puts the model's own modules back."""
    from compact_bert.export.moe_export_form import (
        CapacityExperts,
        RoutedExpertLinear,
        RoutedExperts,
        StaticExpertLinear,
        StaticExperts,
        export_expert_form,
    )

    classes = {
        "routed": (RoutedExperts, RoutedExpertLinear),
        "static": (StaticExperts, StaticExpertLinear),
        "capacity": (CapacityExperts, StaticExpertLinear),
    }[form]
    config = copy.deepcopy(tiny_configs()[config_id])
    if form != "static":
        config.eval_capacity_factor = 0.5  # drops tokens at inference too: the form must drop the same ones
    model = AutoModelForSequenceClassification.from_config(config).eval()
    own = list(model.modules())
    batch = random_batch()
    with torch.no_grad():
        loop = model(**batch)
        with export_expert_form(model, routed=form == "routed") as swapped:
            assert swapped == sum(isinstance(m, classes) for m in model.modules()) > 0
            assert not any(
                isinstance(m, tuple(c for c in (RoutedExperts, StaticExperts, CapacityExperts) if c not in classes))
                for m in model.modules()
            )
            form_outputs = model(**batch)
    assert list(model.modules()) == own
    if form != "static" and config.num_experts > 1:
        assert float(model(**batch, output_router_stats=True).dropped_token_fraction.max()) > 0
    torch.testing.assert_close(form_outputs.logits, loop.logits, rtol=1e-5, atol=1e-5)
