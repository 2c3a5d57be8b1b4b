"""Every family and head: shapes, losses, gradients, padding invariance, save/load, Auto classes."""

from __future__ import annotations

import copy
import dataclasses
import sys

import pytest
import torch
import transformers
from transformers import AutoConfig, AutoModel, PreTrainedModel, modeling_outputs

from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from tests.conftest import VOCAB_SIZE, random_batch, tiny_configs

CONFIGS = tiny_configs()
CASES = [
    (config_id, auto_name)
    for config_id, config in CONFIGS.items()
    for auto_name in AUTO_CLASSES_BY_CONFIG[type(config)]
]


def _labels(auto_name: str, batch: dict, config) -> dict:
    batch_size, seq = batch["input_ids"].shape
    generator = torch.Generator().manual_seed(2)
    if auto_name == "AutoModelForMaskedLM":
        labels = torch.full((batch_size, seq), -100)
        labels[:, 1:4] = torch.randint(0, VOCAB_SIZE, (batch_size, 3), generator=generator)
        return {"labels": labels}
    if auto_name == "AutoModelForPreTraining":
        labels = torch.full((batch_size, seq), -100)
        labels[:, 2] = 7
        return {"labels": labels, "next_sentence_label": torch.tensor([0, 1, 0][:batch_size])}
    if auto_name == "AutoModelForSequenceClassification":
        return {"labels": torch.tensor([0, 1, 2][:batch_size])}
    if auto_name == "AutoModelForTokenClassification":
        labels = torch.randint(0, 3, (batch_size, seq), generator=generator)
        labels[batch["attention_mask"] == 0] = -100
        return {"labels": labels}
    if auto_name == "AutoModelForQuestionAnswering":
        return {
            "start_positions": torch.tensor([1, 2, 3][:batch_size]),
            "end_positions": torch.tensor([4, 5, 6][:batch_size]),
        }
    return {}


def _build(config_id: str, auto_name: str):
    config = CONFIGS[config_id]
    if auto_name in ("AutoModelForSequenceClassification", "AutoModelForTokenClassification"):
        config = copy.deepcopy(config)
        config.num_labels = 3
    model_class = AUTO_CLASSES_BY_CONFIG[type(config)][auto_name]
    return model_class(config), config


def _main_output(outputs, auto_name: str) -> torch.Tensor:
    names = {
        "AutoModel": "last_hidden_state",
        "AutoModelForPreTraining": "prediction_logits",
        "AutoModelForQuestionAnswering": "start_logits",
    }
    return getattr(outputs, names.get(auto_name, "logits"))


@pytest.mark.parametrize(("config_id", "auto_name"), CASES)
def test_forward_shapes_loss_and_gradients(config_id, auto_name):
    model, config = _build(config_id, auto_name)
    model.train()
    batch = random_batch(batch=3, seq=24)
    labels = _labels(auto_name, batch, config)
    outputs = model(**batch, **labels, output_hidden_states=True, output_attentions=True)
    main = _main_output(outputs, auto_name)
    assert main.shape[0] == 3
    if auto_name == "AutoModel":
        assert main.shape == (3, 24, config.hidden_size)
        assert len(outputs.hidden_states) == config.num_hidden_layers + 1
        assert outputs.attentions[0].shape == (3, config.num_attention_heads, 24, 24)
        loss = main.pow(2).mean() + (outputs.pooler_output.pow(2).mean())
        if outputs.get("aux_loss") is not None:
            loss = loss + outputs.aux_loss
    else:
        assert outputs.loss is not None and outputs.loss.ndim == 0 and torch.isfinite(outputs.loss)
        loss = outputs.loss
    loss.backward()
    no_gradient = [
        name
        for name, parameter in model.named_parameters()
        if parameter.grad is None or not parameter.grad.abs().sum() > 0
    ]
    # Every parameter, every expert included, must be reached (24 tokens x 3 sequences is enough).
    assert no_gradient == [], no_gradient


@pytest.mark.parametrize(("config_id", "auto_name"), CASES)
def test_no_loss_without_labels(config_id, auto_name):
    model, _ = _build(config_id, auto_name)
    outputs = model.eval()(**random_batch())
    assert getattr(outputs, "loss", None) is None


@pytest.mark.parametrize("config_id", list(CONFIGS))
def test_padding_does_not_change_real_tokens(config_id):
    model = AutoModel.from_config(CONFIGS[config_id]).eval()
    batch = random_batch(batch=2, seq=10, pad_from=None)
    padded_ids = torch.cat([batch["input_ids"], torch.zeros(2, 6, dtype=torch.long)], dim=1)
    padded_mask = torch.cat([batch["attention_mask"], torch.zeros(2, 6, dtype=torch.long)], dim=1)
    with torch.no_grad():
        stats = {"output_router_stats": True} if hasattr(model.config, "num_experts") else {}  # sparse families
        plain = model(**batch, **stats)
        padded = model(input_ids=padded_ids, attention_mask=padded_mask, **stats)
    torch.testing.assert_close(padded.last_hidden_state[:, :10], plain.last_hidden_state, atol=1e-5, rtol=1e-5)
    if plain.get("expert_load") is not None:
        torch.testing.assert_close(padded.expert_load, plain.expert_load)


@pytest.mark.parametrize(("config_id", "auto_name"), CASES)
def test_save_and_load_round_trip(tmp_path, config_id, auto_name):
    model, _ = _build(config_id, auto_name)
    with torch.no_grad():
        # Perturb everything, so that a parameter that fails to load cannot hide behind its initial value.
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    model.eval().save_pretrained(tmp_path)
    loaded = getattr(transformers, auto_name).from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    batch = random_batch()
    with torch.no_grad():
        torch.testing.assert_close(_main_output(loaded(**batch), auto_name), _main_output(model(**batch), auto_name))


@pytest.mark.parametrize("config_id", list(CONFIGS))
def test_auto_classes_build_from_model_type(config_id):
    config = CONFIGS[config_id]
    fields = {key: value for key, value in config.to_diff_dict().items() if key != "model_type"}
    rebuilt = AutoConfig.for_model(config.model_type, **fields)
    assert type(rebuilt) is type(config)
    for auto_name, model_class in AUTO_CLASSES_BY_CONFIG[type(config)].items():
        assert type(getattr(transformers, auto_name).from_config(rebuilt)) is model_class


@pytest.mark.parametrize(("config_id", "auto_name"), CASES)
def test_return_dict_false_gives_the_output_fields_as_a_tuple(config_id, auto_name):
    """As transformers' ``can_return_tuple``: the argument or the config's ``return_dict`` asks for the
    output's non-``None`` fields in order; heads still read their backbone's output by name."""
    torch.manual_seed(0)
    model, config = _build(config_id, auto_name)
    model.config = config = copy.deepcopy(config)  # the test sets the config's return_dict
    model.eval()
    batch = random_batch()
    batch.update(_labels(auto_name, batch, config))
    with torch.no_grad():
        expected = model(**batch).to_tuple()
        from_argument = model(**batch, return_dict=False)
        model.config.return_dict = False
        from_config = model(**batch)
        from_argument_over_config = model(**batch, return_dict=True)
    for outputs in (from_argument, from_config):
        assert isinstance(outputs, tuple) and len(outputs) == len(expected)
        for got, want in zip(outputs, expected, strict=True):
            assert torch.equal(got, want) if isinstance(want, torch.Tensor) else got == want
    assert not isinstance(from_argument_over_config, tuple)


@pytest.mark.parametrize(("config_id", "auto_name"), CASES)
def test_every_head_is_its_family_class_on_the_family_base(config_id, auto_name):
    """Flattened as transformers writes its model files: a head's classes between it and transformers'
    ``PreTrainedModel`` are its own and its family's ``…PreTrainedModel``, both defined in the family's file and named
    after the family; no class of that file carries another family's or an architecture's name."""
    model_class = AUTO_CLASSES_BY_CONFIG[type(CONFIGS[config_id])][auto_name]
    generated_file = sys.modules[model_class.__module__]
    prefix = model_class.__name__.removesuffix(auto_name.removeprefix("AutoModel") or "Model")
    ours = [klass for klass in model_class.__mro__ if klass.__module__ == model_class.__module__]
    assert [klass.__name__ for klass in ours] == [model_class.__name__, f"{prefix}PreTrainedModel"]
    assert model_class.__mro__[len(ours)] is PreTrainedModel
    defined = [value for value in vars(generated_file).values() if isinstance(value, type)]
    own = [klass.__name__ for klass in defined if klass.__module__ == generated_file.__name__]
    assert own and all(name.startswith(prefix) for name in own), own


def test_too_long_input_fails_with_clear_error():
    model = AutoModel.from_config(CONFIGS["minimoe"])
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(input_ids=torch.ones(1, 65, dtype=torch.long))


def test_hash_routing_rejects_inputs_embeds():
    model = AutoModel.from_config(CONFIGS["minimoe_hash"])
    with pytest.raises(ValueError, match="input_ids"):
        model(inputs_embeds=torch.randn(1, 4, 32))


@pytest.mark.parametrize("config_id", ["minimoe", "mobilebert", "moe_bert"])
def test_gradient_checkpointing_matches_plain_gradients(config_id):
    config = CONFIGS[config_id]
    config = type(config).from_dict(
        {**config.to_dict(), "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    )
    plain = AutoModel.from_config(config).train()
    checkpointed = AutoModel.from_config(config).train()
    checkpointed.load_state_dict(plain.state_dict())
    # transformers 5 names it activation_checkpointing_enable (the old name is a deprecated alias).
    enable = (
        getattr(checkpointed, "activation_checkpointing_enable", None) or checkpointed.gradient_checkpointing_enable
    )
    enable()
    batch = random_batch()
    for model in (plain, checkpointed):
        outputs = model(**batch)
        loss = outputs.last_hidden_state.pow(2).mean()
        if outputs.get("aux_loss") is not None:
            loss = loss + outputs.aux_loss
        loss.backward()
    for (name, first), (_, second) in zip(plain.named_parameters(), checkpointed.named_parameters()):
        torch.testing.assert_close(first.grad, second.grad, msg=name, atol=1e-6, rtol=1e-4)


def test_moe_head_loss_includes_balance_loss():
    model, config = _build("minimoe", "AutoModelForSequenceClassification")
    model.eval()
    batch = random_batch()
    labels = torch.tensor([0, 1, 2])
    outputs = model(**batch, labels=labels, output_router_stats=True)
    task_loss = torch.nn.functional.cross_entropy(outputs.logits, labels)
    torch.testing.assert_close(outputs.loss, task_loss + outputs.aux_loss)
    assert outputs.aux_loss > 0 and outputs.expert_load.shape == (config.num_hidden_layers, config.num_experts)
    # Not asked for in eval mode: the loss is the task loss, the routing statistics are not computed.
    plain = model(**batch, labels=labels)
    assert plain.aux_loss is None and plain.expert_load is None
    torch.testing.assert_close(plain.loss, task_loss)


def test_router_logits_only_when_requested():
    model = AutoModel.from_config(CONFIGS["minimoe_moe_attention"]).eval()
    assert model(**random_batch()).router_logits is None
    logits = model(**random_batch(batch=2, seq=5), output_router_logits=True).router_logits
    # Two MoE blocks per layer (MHA and FFN), two layers.
    assert [tuple(block.shape) for block in logits] == [(2, 5, 2), (2, 5, 4)] * 2


ROUTING_FIELDS = ["router_logits", "aux_loss", "expert_load", "dropped_token_fraction"]


@pytest.mark.parametrize("config_id", ["minimoe", "moe_bert"])
def test_moe_outputs_are_transformers_outputs_with_the_routing_fields_after_theirs(config_id):
    """Each output class is transformers' own for its head (on both transformers lines), the four routing fields
    appended, so that code reading transformers' outputs reads these, by name or by position."""
    expected = {
        "AutoModel": modeling_outputs.BaseModelOutputWithPooling,
        "AutoModelForMaskedLM": modeling_outputs.MaskedLMOutput,
        "AutoModelForSequenceClassification": modeling_outputs.SequenceClassifierOutput,
        "AutoModelForTokenClassification": modeling_outputs.TokenClassifierOutput,
        "AutoModelForQuestionAnswering": modeling_outputs.QuestionAnsweringModelOutput,
    }
    batch = random_batch()
    for auto_name, transformers_output in expected.items():
        model, config = _build(config_id, auto_name)
        outputs = model.train()(**batch, **_labels(auto_name, batch, config))
        assert isinstance(outputs, transformers_output)
        names = [field.name for field in dataclasses.fields(outputs)]
        assert names == [field.name for field in dataclasses.fields(transformers_output)] + ROUTING_FIELDS
        if auto_name != "AutoModel":
            assert outputs.loss is not None and outputs.aux_loss is not None and outputs.expert_load is not None


@pytest.mark.parametrize("auto_name", ["AutoModelForMaskedLM", "AutoModelForSequenceClassification"])
def test_a_dense_forward_runs_no_routing_code(auto_name, monkeypatch):
    """``num_experts == num_attention_experts == 1``: the model has no router, and its forward and loss call none
    of the routing helpers, even when routing outputs are asked for."""
    model, config = _build("vanilla_bert", auto_name)
    module = sys.modules[type(model).__module__]

    def refuse(*args, **kwargs):
        raise AssertionError("routing code ran in a dense forward")

    for name in ("routing_outputs", "load_balancing_loss", "expert_fractions", "capacity_keep"):
        monkeypatch.setattr(module, name, refuse)
    for routing_class in ("MoEBertRouter", "MoEBertSparseFeedForward", "MoEBertExperts", "MoEBertExpertLinear"):
        monkeypatch.setattr(getattr(module, routing_class), "forward", refuse)
    assert not any(name.endswith(("router", "moe")) for name, _ in model.named_modules())
    batch = random_batch()
    outputs = model.train()(**batch, **_labels(auto_name, batch, config), output_router_stats=True)
    outputs.loss.backward()
    assert not set(ROUTING_FIELDS) & set(outputs.keys())  # ModelOutput keys: the fields that are not None
