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
    outputs = model(**batch, labels=labels, output_router_stats=True)
    assert outputs.aux_loss == 0
    assert torch.isfinite(outputs.loss)


@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe", "moe_bert"])
@pytest.mark.parametrize("shape", [(2, 0), (0, 4)])
def test_inputs_without_tokens_are_refused_by_name(config_id, shape):
    model = AutoModel.from_config(tiny_configs()[config_id]).eval()
    with pytest.raises(ValueError, match=rf"Inputs of shape \({shape[0]}, {shape[1]}\) hold no token"):
        model(input_ids=torch.zeros(shape, dtype=torch.long))


@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe"])
def test_ids_on_an_accelerator_are_checked_on_the_device_without_a_host_read(config_id, monkeypatch):
    """Off the CPU the range check is queued on the device (``torch._assert_async``), with the message that names
    the argument and its range, and the ids are never read on the host (which would synchronise at every call).
    Meta tensors stand in for an accelerator's: reading one on the host raises."""
    model = AutoModel.from_config(CONFIGS[config_id]).eval()
    queued = []
    monkeypatch.setattr(torch, "_assert_async", lambda condition, message: queued.append((condition, message)))
    input_ids = torch.empty(2, 8, dtype=torch.long, device="meta")
    model.check_inputs(input_ids, None, token_type_ids=torch.empty_like(input_ids))
    messages = [message for _, message in queued]
    assert [message.split("`")[1] for message in messages] == ["input_ids", "token_type_ids"]
    assert messages[0].startswith(f"`input_ids` must lie in [0, {VOCAB_SIZE}) (the model's `vocab_size`)")
    assert all(condition.device.type == "meta" and condition.dtype == torch.bool for condition, _ in queued)


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
