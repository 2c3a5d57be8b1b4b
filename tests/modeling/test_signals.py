"""Hooks read the right tensors from our models and from transformers' BertModel, leaving them unchanged."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModel, BertConfig, BertModel, RobertaConfig, RobertaModel

from compact_bert.modeling.signals import SubmoduleRecorder, signal_module_name
from tests.conftest import random_batch, tiny_configs


def _teachers():
    bert = BertModel(
        BertConfig(
            vocab_size=128,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=64,
        )
    )
    roberta = RobertaModel(
        RobertaConfig(
            vocab_size=128,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=70,
            pad_token_id=1,
        )
    )
    configs = tiny_configs()
    return {
        "transformers_bert": bert,
        "transformers_roberta": roberta,
        "moe_bert": AutoModel.from_config(configs["moe_bert"]),
        "vanilla_bert": AutoModel.from_config(configs["vanilla_bert"]),
    }


@pytest.mark.parametrize("model_id", ["transformers_bert", "transformers_roberta", "moe_bert", "vanilla_bert"])
def test_qkv_trunk_and_residual_inner_signals(model_id):
    model = _teachers()[model_id].eval()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    names = {
        f"{signal}{layer}": signal_module_name(signal, layer)
        for signal in ("query", "key", "value", "attention_norm", "ffn_norm")
        for layer in range(2)
    }
    for layer in range(2):
        names[f"attention_dense{layer}"] = f"encoder.layer.{layer}.attention.output.dense"
        sparse = hasattr(model.encoder.layer[layer], "moe")
        names[f"ffn_inner{layer}"] = f"encoder.layer.{layer}." + ("moe" if sparse else "output.dense")
    batch = random_batch()
    with torch.no_grad(), SubmoduleRecorder(model, names, record_inputs=True) as recorder:
        outputs = model(**batch, output_hidden_states=True)
    hidden_states = outputs.hidden_states
    for layer in range(2):
        attention = model.encoder.layer[layer].attention.self
        for signal in ("query", "key", "value"):
            projection = getattr(attention, signal)
            expected = F.linear(hidden_states[layer], projection.weight, projection.bias)
            torch.testing.assert_close(recorder.outputs[f"{signal}{layer}"], expected)
        # Trunk: the FFN LayerNorm's output is the layer output.
        torch.testing.assert_close(recorder.outputs[f"ffn_norm{layer}"], hidden_states[layer + 1])
        # Residual inner (eval, no dropout): LayerNorm input minus its residual is the sublayer output.
        attention_inner = recorder.inputs[f"attention_norm{layer}"] - hidden_states[layer]
        torch.testing.assert_close(attention_inner, recorder.outputs[f"attention_dense{layer}"], atol=1e-5, rtol=1e-4)
        ffn_inner = recorder.inputs[f"ffn_norm{layer}"] - recorder.outputs[f"attention_norm{layer}"]
        sublayer = recorder.outputs[f"ffn_inner{layer}"]
        sublayer = sublayer[0] if isinstance(sublayer, tuple) else sublayer
        torch.testing.assert_close(ffn_inner, sublayer, atol=1e-5, rtol=1e-4)
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())


def test_hooks_are_removed_after_the_context():
    model = _teachers()["moe_bert"]
    with SubmoduleRecorder(model, {"q": signal_module_name("query", 0)}):
        pass
    assert all(not module._forward_hooks for module in model.modules())


def test_missing_submodule_is_a_clear_error():
    with pytest.raises(ValueError, match="no submodule"):
        SubmoduleRecorder(_teachers()["moe_bert"], {"q": signal_module_name("query", 7)})
    with pytest.raises(ValueError, match="valid signals"):
        signal_module_name("gate", 0)


def test_the_auxiliary_attention_block_runs_only_while_a_recorder_reads_it():
    """MiniMoE's auxiliary MHA block is no part of the model's forward: a recorder reading its Q/K/V runs it on the
    encoder's output with the model's masks (gradients flow), and the model's outputs are those of a plain call."""
    config = type(tiny_configs()["minimoe"]).from_dict(
        {**tiny_configs()["minimoe"].to_dict(), "use_auxiliary_attention": True}
    )
    model = AutoModel.from_config(config).eval()
    auxiliary = model.encoder.auxiliary_attention
    calls = []
    auxiliary.register_forward_hook(lambda module, args, output: calls.append(args))
    batch = random_batch()
    plain = model(**batch).last_hidden_state
    assert calls == []
    names = {signal: signal_module_name(signal, "auxiliary") for signal in ("query", "key", "value")}
    with SubmoduleRecorder(model, names) as recorder:
        recorded = model(**batch).last_hidden_state
    torch.testing.assert_close(recorded, plain, rtol=0, atol=0)
    assert len(calls) == 1 and calls[0][0] is recorded
    assert torch.equal(calls[0][2].bool(), batch["attention_mask"].bool()) and calls[0][3] is batch["input_ids"]
    projection = auxiliary.self.query
    torch.testing.assert_close(recorder.outputs["query"], F.linear(recorded, projection.weight, projection.bias))
    assert {key: value.shape for key, value in recorder.outputs.items()} == {key: (3, 12, 32) for key in names}
    recorder.outputs["value"].sum().backward()
    assert auxiliary.self.value.weight.grad is not None
    model(**batch)
    assert len(calls) == 1  # the hook left with the recorder
    with pytest.raises(ValueError, match="no submodule"):
        SubmoduleRecorder(AutoModel.from_config(tiny_configs()["minimoe"]), names)
