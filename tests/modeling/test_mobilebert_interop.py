"""Parity with transformers' MobileBERT through ``compact-bert convert``, both directions."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from compact_bert.cli.main import main
from compact_bert.modeling.conversion import to_compact_config
from tests.conftest import random_batch


def _transformers_model(model_class, **fields):
    config = transformers.MobileBertConfig(
        vocab_size=128,
        hidden_size=64,
        embedding_size=16,
        intra_bottleneck_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=64,
        **fields,
    )
    model = model_class(config).eval()
    with torch.no_grad():
        # Non-trivial NoNorm scales and biases, so that a mis-ordered operation cannot hide.
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                parameter.add_(0.2 * torch.randn_like(parameter))
    return model


@pytest.mark.parametrize(
    ("model_class", "auto_name", "output"),
    [
        (transformers.MobileBertModel, "AutoModel", "last_hidden_state"),
        (transformers.MobileBertForMaskedLM, "AutoModelForMaskedLM", "logits"),
        (transformers.MobileBertForPreTraining, "AutoModelForPreTraining", "prediction_logits"),
    ],
)
@pytest.mark.parametrize("variant", [{}, {"use_bottleneck_attention": True, "num_feedforward_networks": 2}])
def test_convert_both_directions_keeps_outputs(tmp_path, capsys, model_class, auto_name, output, variant):
    original = _transformers_model(model_class, **variant)
    original.save_pretrained(tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "ours")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["direction"].endswith("-> compact_mobilebert") and summary["max_abs_difference"] <= 1e-5
    ours = getattr(transformers, auto_name).from_pretrained(tmp_path / "ours").eval()
    assert type(ours).__name__.startswith("CompactMobileBert")
    batch = random_batch(seq=20)
    with torch.no_grad():
        expected = getattr(original(**batch, output_hidden_states=True), output)
        converted = ours(**batch, output_hidden_states=True)
    assert (getattr(converted, output) - expected).abs().max() <= 1e-5

    assert main(["convert", str(tmp_path / "ours"), str(tmp_path / "back")]) == 0
    back = model_class.from_pretrained(tmp_path / "back").eval()
    with torch.no_grad():
        assert (getattr(back(**batch), output) - expected).abs().max() <= 1e-5


def test_hidden_states_match_layer_by_layer(tmp_path):
    original = _transformers_model(transformers.MobileBertModel)
    original.save_pretrained(tmp_path / "hf")
    main(["convert", str(tmp_path / "hf"), str(tmp_path / "ours")])
    ours = transformers.AutoModel.from_pretrained(tmp_path / "ours").eval()
    batch = random_batch(seq=16)
    with torch.no_grad():
        first = original(**batch, output_hidden_states=True, output_attentions=True)
        second = ours(**batch, output_hidden_states=True, output_attentions=True)
    for a, b in zip(first.hidden_states + first.attentions, second.hidden_states + second.attentions):
        assert (a - b).abs().max() <= 1e-5


def test_unconvertible_inputs_fail_clearly(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="compact-bert: convert: .*config.json does not exist"):
        main(["convert", str(tmp_path / "empty"), str(tmp_path / "out")])
    transformers.BertConfig().save_pretrained(tmp_path / "bert")
    with pytest.raises(SystemExit, match="model_type 'bert' cannot be converted"):
        main(["convert", str(tmp_path / "bert"), str(tmp_path / "out")])
    nsp = _transformers_model(transformers.MobileBertForNextSentencePrediction)
    nsp.save_pretrained(tmp_path / "nsp")
    with pytest.raises(SystemExit, match="convertible architectures"):
        main(["convert", str(tmp_path / "nsp"), str(tmp_path / "out")])
    broken = transformers.MobileBertConfig(key_query_shared_bottleneck=False, use_bottleneck_attention=False)
    with pytest.raises(ValueError, match="IBBertConfig"):
        to_compact_config(broken)
