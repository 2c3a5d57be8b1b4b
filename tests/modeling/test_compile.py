"""``torch.compile`` over every family: one graph (``fullgraph``) with dynamic batch and sequence length, and
MoE routing that stays right for inputs routed differently from the warm-up input."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from tests.conftest import random_batch, tiny_configs

FAMILIES = ["ib_bert", "mobilebert", "minimoe", "minimoe_moe_attention", "minimoe_hash", "moe_bert"]


def _model(config_id: str):
    torch.manual_seed(0)
    model = AutoModel.from_config(tiny_configs()[config_id]).eval()
    with torch.no_grad():  # weights far from the init's, so that different tokens pick different experts
        for name, parameter in model.named_parameters():
            if "router" in name:
                parameter.normal_(std=1.0)
    return model


def _routed_apart(model) -> tuple[dict, dict]:
    """Two batches of different shapes whose tokens pick different sets of experts in the first MoE block."""
    first, second = random_batch(3, 12), random_batch(2, 20, pad_from=None)
    second["input_ids"] = (second["input_ids"] * 7 + 3) % tiny_configs()["minimoe"].vocab_size
    return first, second


@pytest.mark.parametrize("config_id", FAMILIES)
def test_every_family_compiles_to_one_graph_with_dynamic_shapes(config_id):
    """Dynamo's capture (``backend="eager"``) decides graph breaks and recompiles; inductor is tested below."""
    model = _model(config_id)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager", dynamic=True, fullgraph=True)
    with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        for batch in _routed_apart(model):
            expected = model(**batch).last_hidden_state
            torch.testing.assert_close(compiled(**batch).last_hidden_state, expected, rtol=0, atol=1e-5)


def test_inductor_with_freezing_keeps_routing_right_for_differently_routed_inputs(tmp_path, monkeypatch):
    # A private kernel cache: a half-written shared one (an interrupted run, another environment's compile at the
    # same time) fails with "file too short" instead of testing anything here.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    model = _model("minimoe_moe_attention")
    warm_up, rerouted = _routed_apart(model)
    with torch.no_grad():
        loads = [model(**batch, output_router_stats=True).expert_load[0] for batch in (warm_up, rerouted)]
    assert not torch.equal(loads[0] > 0, loads[1] > 0) or not torch.allclose(loads[0], loads[1])
    torch._dynamo.reset()
    compiled = torch.compile(model, dynamic=True, fullgraph=True, options={"freezing": True})
    with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        for batch in (warm_up, rerouted):
            expected = model(**batch, output_router_stats=True)
            actual = compiled(**batch, output_router_stats=True)
            torch.testing.assert_close(actual.last_hidden_state, expected.last_hidden_state, rtol=0, atol=1e-5)
            torch.testing.assert_close(actual.expert_load, expected.expert_load, rtol=0, atol=0)
