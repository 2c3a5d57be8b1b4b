"""``torch.export`` of every base model; MoE programs stay correct for routes the example never took."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from tests.conftest import random_batch, tiny_configs

CONFIGS = tiny_configs()


@pytest.mark.parametrize("config_id", list(CONFIGS))
def test_export_base_model(config_id):
    model = AutoModel.from_config(CONFIGS[config_id]).eval()
    example = random_batch(batch=2, seq=8, pad_from=None)
    # A constant example sequence routes every token of a layer to one expert.
    example["input_ids"] = torch.full_like(example["input_ids"], 5)
    program = torch.export.export(model, (), dict(example))
    other = random_batch(batch=2, seq=8, pad_from=5)
    with torch.no_grad():
        eager = model(**other)
        exported = program.module()(**other)
        # Only sparse models route (and take the flag that asks for their routing statistics at inference).
        stats = {"output_router_stats": True} if hasattr(model.config, "num_experts") else {}
        example_routing = model(**example, **stats).get("expert_load")
        other_routing = model(**other, **stats).get("expert_load")
    torch.testing.assert_close(exported.last_hidden_state, eager.last_hidden_state, atol=1e-5, rtol=1e-5)
    if other_routing is not None:
        used_by_other = (other_routing > 0) & (example_routing == 0)
        assert used_by_other.any(), "the test input must reach experts the example input never used"
