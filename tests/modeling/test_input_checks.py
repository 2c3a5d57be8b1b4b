"""Bad inputs fail early with a message naming the argument and the valid range; degenerate batches are safe."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, AutoModelForMaskedLM

from tests.conftest import VOCAB_SIZE, random_batch, tiny_configs

CONFIGS = tiny_configs()


@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe", "moe_bert"])
@pytest.mark.parametrize(
    ("argument", "value", "size_field"),
    [
        ("input_ids", VOCAB_SIZE, "vocab_size"),
        ("input_ids", -1, "vocab_size"),
        ("token_type_ids", 2, "type_vocab_size"),
        ("position_ids", 64, "max_position_embeddings"),
    ],
)
def test_ids_outside_the_embedding_tables_name_the_argument(config_id, argument, value, size_field):
    model = AutoModel.from_config(CONFIGS[config_id]).eval()
    batch = random_batch()
    tensor = batch.get(argument, torch.zeros_like(batch["input_ids"])).clone()
    tensor[0, 1] = value
    batch[argument] = tensor
    with pytest.raises(ValueError, match=rf"`{argument}` must lie in \[0, \d+\) \(the model's `{size_field}`\)"):
        model(**batch)


def test_a_fully_padded_moe_batch_adds_no_balance_loss():
    """Paper 003's KL-to-uniform balance loss has no distribution to balance without real tokens; it once
    added ~86,000 (x lambda_B) to such a batch's loss."""
    model = AutoModelForMaskedLM.from_config(CONFIGS["moe_bert"]).eval()
    batch = random_batch()
    batch["attention_mask"] = torch.zeros_like(batch["attention_mask"])
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 0] = 5
    outputs = model(**batch, labels=labels)
    assert outputs.aux_loss == 0
    assert torch.isfinite(outputs.loss)


@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe", "moe_bert"])
@pytest.mark.parametrize("shape", [(2, 0), (0, 4)])
def test_inputs_without_tokens_are_refused_by_name(config_id, shape):
    model = AutoModel.from_config(tiny_configs()[config_id]).eval()
    with pytest.raises(ValueError, match=rf"Inputs of shape \({shape[0]}, {shape[1]}\) hold no token"):
        model(input_ids=torch.zeros(shape, dtype=torch.long))
