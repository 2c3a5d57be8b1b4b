"""``optimize_for_inference``: the explicit CPU fast path swaps modules, keeps the model's parameters and outputs, and
measures (once, inside the call) where the packed forms pay; nothing is timed or written inside ``forward``."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

from compact_bert import optimize_for_inference
from compact_bert.optimization import INFERENCE_OPTIMIZATIONS, packed_weight_bytes
from compact_bert.optimization.inference_optimizer import PackedIntermediate
from compact_bert.optimization.onednn_weights import packing_available
from compact_bert.optimization.packed_modules import PackedExperts, PackedLinear, PackedResidualOutput
from tests.conftest import random_batch, tiny_configs

needs_onednn = pytest.mark.skipif(not packing_available(), reason="oneDNN's packed linear ops are not available")


def _bert_teacher():
    config = BertConfig(
        vocab_size=tiny_configs()["minimoe"].vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    return BertForSequenceClassification(config).eval()


def _model(config_id: str):
    if config_id == "transformers_bert":
        return _bert_teacher()
    return AutoModelForSequenceClassification.from_config(copy.deepcopy(tiny_configs()[config_id])).eval()


CASES = ["minimoe", "minimoe_moe_attention", "minilm_dense", "moe_bert", "mobilebert", "ib_bert", "transformers_bert"]


@needs_onednn
@pytest.mark.parametrize("config_id", CASES)
def test_every_swap_keeps_the_outputs_and_the_parameters(config_id):
    torch.manual_seed(0)
    model = _model(config_id)
    plain = copy.deepcopy(model)
    before = model.state_dict(keep_vars=True)
    report = optimize_for_inference(model, measure=False)
    assert report.swapped.get("linear", 0) > 0
    if config_id != "minimoe_moe_attention":  # its attention output is per expert, its FFN an MoE block
        assert report.swapped.get("residual_output", 0) > 0
    if config_id in ("minimoe", "minimoe_moe_attention", "moe_bert"):
        assert report.swapped["experts"] == model.config.num_hidden_layers
        assert any(isinstance(module, PackedExperts) for module in model.modules())
    after = model.state_dict(keep_vars=True)
    assert list(after) == list(before) and all(after[key] is before[key] for key in before)
    batch = random_batch()
    with torch.no_grad():
        expected = plain(**batch).logits
        got = model(**batch).logits
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert packed_weight_bytes(model) > 0


@needs_onednn
def test_training_through_swapped_modules_is_the_plain_models_training():
    torch.manual_seed(0)
    model = _model("minimoe")
    plain = copy.deepcopy(model)
    optimize_for_inference(model, measure=False)
    batch, labels = random_batch(), torch.tensor([0, 1, 0])
    gradients = []
    for candidate in (plain, model):
        candidate.train()
        torch.manual_seed(3)
        candidate(**batch, labels=labels).loss.backward()
        gradients.append({name: p.grad for name, p in candidate.named_parameters() if p.grad is not None})
    assert gradients[0].keys() == gradients[1].keys()
    for name, gradient in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], gradient, rtol=1e-5, atol=1e-6, msg=name)


@needs_onednn
def test_packed_copies_follow_every_change_of_their_weights():
    """An optimizer step, ``load_state_dict`` and an edit through ``param.data`` (as PEFT's merge does) all reach the
    packed copies: the next inference uses the new weights."""
    torch.manual_seed(0)
    model = _model("minimoe")
    optimize_for_inference(model, measure=False)
    batch = random_batch()
    reference = copy.deepcopy(model)

    def check():
        with torch.no_grad():
            torch.testing.assert_close(
                model(**batch).logits, _plain_logits(reference, model, batch), atol=1e-5, rtol=0
            )

    check()  # packs
    model.train()
    loss = model(**batch, labels=torch.tensor([0, 1, 0])).loss
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    model.eval()
    check()
    model.load_state_dict({name: value + 0.01 for name, value in model.state_dict().items()})
    check()
    with torch.no_grad():
        model.base_model.encoder.layer[0].moe.experts.up_proj.data.mul_(1.5)
        model.base_model.encoder.layer[0].attention.self.query.weight.data.mul_(1.5)
    check()


def _plain_logits(template, model, batch):
    """The logits of a plain (never optimized) model carrying ``model``'s current weights."""
    plain = AutoModelForSequenceClassification.from_config(template.config).eval()
    plain.load_state_dict(model.state_dict())
    return plain(**batch).logits


@needs_onednn
def test_measuring_swaps_only_what_it_measured_faster_and_reports_it(monkeypatch):
    from compact_bert.optimization import inference_optimizer

    model = _model("minimoe")
    verdicts = iter([True, False] * 50)
    monkeypatch.setattr(inference_optimizer, "_pays", lambda *args: next(verdicts))
    report = optimize_for_inference(model)
    swapped_linear = sum(isinstance(module, PackedLinear) for module in model.modules())
    assert 0 < sum(report.swapped.values()) < sum(1 for _ in model.modules())
    assert swapped_linear == report.swapped.get("linear", 0) + report.swapped.get("intermediate", 0)
    assert str(report).startswith("optimize_for_inference swapped:")


@needs_onednn
def test_a_real_measurement_records_a_ratio_per_shape():
    model = _model("minilm_dense")
    report = optimize_for_inference(model, tokens=64)
    assert report.measured and all(ratio > 0 for ratio in report.measured.values())
    residual = sum(isinstance(module, PackedResidualOutput) for module in model.modules())
    kept = [label for label, ratio in report.measured.items() if ratio < 1.0 and label.startswith("residual_output")]
    assert (residual > 0) == bool(kept)


def test_an_unknown_optimization_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError, match="registered: " + ", ".join(INFERENCE_OPTIMIZATIONS)):
        optimize_for_inference(_model("minimoe"), optimizations=("fastest",))


@needs_onednn
def test_optimizing_and_running_write_no_file(tmp_path, monkeypatch):
    for variable in ("HOME", "XDG_CACHE_HOME", "COMPACT_BERT_CACHE"):
        monkeypatch.setenv(variable, str(tmp_path / variable))
    model = _model("minimoe")
    optimize_for_inference(model)
    with torch.no_grad():
        model(**random_batch())
    assert not any(os.scandir(tmp_path)), list(tmp_path.rglob("*"))


@needs_onednn
def test_a_saved_optimized_model_is_the_plain_model(tmp_path):
    model = _model("minimoe")
    optimize_for_inference(model, measure=False)
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert not any(isinstance(module, (PackedLinear, PackedExperts)) for module in reloaded.modules())
    batch = random_batch()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).logits, model(**batch).logits, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_an_optimized_model_deep_copies_and_pickles_after_running():
    """oneDNN's packed tensors cannot be copied or pickled: the copies carry empty caches, filled on first use."""
    import pickle

    model = _model("minimoe")
    optimize_for_inference(model, measure=False)
    batch = random_batch()
    with torch.no_grad():
        expected = model(**batch).logits  # packs
        for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            torch.testing.assert_close(copied(**batch).logits, expected, rtol=0, atol=1e-6)


@needs_onednn
def test_an_encoders_layers_are_decided_on_the_whole_stack_and_the_rest_module_by_module(monkeypatch):
    """The swaps of an encoder's layers are measured on a copy of the whole stack of layers (where the other layers'
    weights compete for the cache, as in the model), each optimization and shape once, and the model's modules of
    those shapes follow the verdicts; a shape outside the stack (the classifier's) is measured alone."""
    from compact_bert.optimization import inference_optimizer

    in_context, alone = [], []

    def faster_in_context(run, members, report, label):
        in_context.append((label, len(members)))
        return label.startswith("intermediate")

    monkeypatch.setattr(inference_optimizer, "_faster_in_context", faster_in_context)
    monkeypatch.setattr(inference_optimizer, "_pays", lambda *args: alone.append(args[-1]) or True)
    model = _bert_teacher()
    before = model.state_dict(keep_vars=True)
    report = optimize_for_inference(model)
    layers = model.config.num_hidden_layers
    labels = [label.split(" ")[0] for label, _ in in_context]
    assert labels == ["intermediate", "residual_output", "residual_output", "linear", "linear"]
    # Per layer: one intermediate and two residual outputs; then, their swaps refused, the plain linears by shape: the
    # query, key, value and attention output (width x width), and the FFN output (width x FFN).
    assert [count for _, count in in_context] == [layers, layers, layers, 4 * layers, layers]
    assert report.swapped["intermediate"] == layers and "residual_output" not in report.swapped
    assert all(isinstance(layer.intermediate, PackedIntermediate) for layer in model.bert.encoder.layer)
    assert all(type(layer.attention.self.query) is torch.nn.Linear for layer in model.bert.encoder.layer)
    # The classifier's shape was not in the stack: measured alone. The pooler's was (the query's): its verdict holds.
    assert len(alone) == 1 and alone[0].startswith("linear") and isinstance(model.classifier, PackedLinear)
    assert type(model.bert.pooler.dense) is torch.nn.Linear
    after = model.state_dict(keep_vars=True)
    assert list(after) == list(before) and all(after[key] is before[key] for key in before)


@needs_onednn
def test_a_real_decision_in_context_records_its_ratio_and_keeps_the_outputs():
    torch.manual_seed(0)
    model = _bert_teacher()
    plain = copy.deepcopy(model)
    report = optimize_for_inference(model, tokens=32)
    labels = [label for label in report.measured if label.endswith("in context")]
    assert labels and all(report.measured[label] > 0 for label in labels)
    batch = random_batch()
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, plain(**batch).logits, rtol=1e-5, atol=1e-5)


class _PairLayer(torch.nn.Module):
    """A layer that needs a second input: its stack cannot run on hidden states alone."""

    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(8, 8)

    def forward(self, hidden_states, other):
        return self.dense(hidden_states) + other


@needs_onednn
def test_layers_that_cannot_run_on_hidden_states_alone_are_measured_module_by_module(monkeypatch):
    from compact_bert.optimization import inference_optimizer

    monkeypatch.setattr(inference_optimizer, "_faster_in_context", lambda *args: pytest.fail("measured in context"))
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList(_PairLayer() for _ in range(2))
    report = optimize_for_inference(model, tokens=16)
    assert len(report.measured) == 1 and next(iter(report.measured)).startswith("linear")
