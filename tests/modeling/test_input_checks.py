"""Bad inputs fail early with a message naming the argument and the valid range; degenerate batches are safe."""

from __future__ import annotations

import sys

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
    outputs = model(**batch, labels=labels, output_router_stats=True)
    assert outputs.aux_loss == 0
    assert torch.isfinite(outputs.loss)


@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe", "moe_bert"])
@pytest.mark.parametrize("shape", [(2, 0), (0, 4)])
def test_inputs_without_tokens_are_refused_by_name(config_id, shape):
    model = AutoModel.from_config(tiny_configs()[config_id]).eval()
    with pytest.raises(ValueError, match=rf"`input_ids` of shape \({shape[0]}, {shape[1]}\) holds no token"):
        model(input_ids=torch.zeros(shape, dtype=torch.long))


@pytest.mark.parametrize("config_id", ["mobilebert", "ib_bert", "vanilla_bert"])
def test_a_forward_reads_no_input_values(config_id, monkeypatch):
    """Nothing a forward checks waits on an accelerator: a whole dense forward runs on meta tensors, which stand in
    for an accelerator's (reading one on the host raises), out-of-range ids included; nothing is queued on the
    device either. Ids are read only once torch's own lookup has failed (on the CPU), to name the argument."""
    monkeypatch.setattr(torch, "_assert_async", None)
    model = AutoModel.from_config(CONFIGS[config_id]).eval().to("meta")
    input_ids = torch.full((2, 8), VOCAB_SIZE + 5, dtype=torch.long, device="meta")
    outputs = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), token_type_ids=input_ids)
    assert outputs.last_hidden_state.device.type == "meta"


def test_moe_forward_checks_read_metadata_only():
    model = AutoModel.from_config(CONFIGS["moe_bert"])
    input_ids = torch.full((2, 8), VOCAB_SIZE + 5, dtype=torch.long, device="meta")
    validate = sys.modules[type(model).__module__].validate_model_inputs
    validate(model.config, input_ids, None, torch.empty_like(input_ids), input_ids[:1], torch.ones_like(input_ids))


@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe"])
@pytest.mark.parametrize("argument", ["input_ids", "inputs_embeds"])
def test_inputs_longer_than_the_position_table_are_refused_by_name(config_id, argument):
    model = AutoModel.from_config(CONFIGS[config_id]).eval()
    limit = model.config.max_position_embeddings
    inputs = torch.ones(2, limit + 3, dtype=torch.long)
    if argument == "inputs_embeds":
        inputs = model.get_input_embeddings()(inputs)
    message = rf"`{argument}` has {limit + 3} positions but `max_position_embeddings` is {limit}"
    with pytest.raises(ValueError, match=message):
        model(**{argument: inputs})


@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe", "moe_bert", "ib_bert"])
@pytest.mark.parametrize(
    ("argument", "make", "message"),
    [
        (
            "input_ids",
            lambda ids: {"input_ids": ids.float()},
            r"`input_ids` must be integer token ids .*torch\.float32",
        ),
        (
            "attention_mask",
            lambda ids: {"input_ids": ids, "attention_mask": torch.ones(2, 5, dtype=torch.long)},
            r"`attention_mask` must have shape \[3, 6\] .*got shape \(2, 5\)",
        ),
        (
            "token_type_ids",
            lambda ids: {"input_ids": ids, "token_type_ids": torch.zeros(3, 6)},
            r"`token_type_ids` must have shape \[3, 6\] .*an integer dtype; got shape \(3, 6\) and dtype torch\.float32",
        ),
        (
            "position_ids",
            lambda ids: {"input_ids": ids, "position_ids": torch.arange(7)[None]},
            r"`position_ids` must have shape \[3, 6\] or \[1, 6\]",
        ),
        (
            "inputs_embeds",
            lambda ids: {"inputs_embeds": torch.zeros(3, 6, 4, dtype=torch.long)},
            r"`inputs_embeds` must be floating point",
        ),
    ],
)
def test_inputs_of_a_wrong_dtype_or_shape_are_refused_naming_the_argument(config_id, argument, make, message):
    """Not torch's message from deep inside ``forward``, but the argument, its shape and dtype and
    what was expected — from the tensors' metadata, so nothing waits on an accelerator."""
    model = AutoModel.from_config(tiny_configs()[config_id]).eval()
    input_ids = torch.ones(3, 6, dtype=torch.long)
    with pytest.raises(ValueError, match=message):
        model(**make(input_ids))


def test_a_position_ids_row_shared_by_the_batch_is_accepted():
    model = AutoModel.from_config(tiny_configs()["minimoe"]).eval()
    with torch.no_grad():
        model(input_ids=torch.ones(3, 6, dtype=torch.long), position_ids=torch.arange(6)[None])
