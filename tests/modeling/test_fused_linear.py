"""Dense linear layers at inference (``modeling/fused_linear.py``): packed weights with bias, activation and
residual fused into the GEMM, and projections of one input joined, for every family. Same outputs as the plain
modules; every hook still sees its call; PEFT's wrapped layers run as PEFT wrote them; copies follow every change
of the weights."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch
from peft import get_peft_model
from torch import nn
from transformers import AutoModel

from compact_bert.finetuning.peft_support import build_peft_config
from compact_bert.modeling import fused_linear as fused_linear_module
from compact_bert.modeling import packed_weights
from compact_bert.modeling.fused_linear import fused_linear, joined_linear
from compact_bert.modeling.packed_weights import packed_weight_bytes, packing_available, weight_packing
from compact_bert.modeling.signals import SubmoduleRecorder, signal_module_name
from tests.conftest import random_batch, sgd_step, tiny_classifier, tiny_configs
from tests.remote_code_helpers import BLOCK_COMPACT_BERT

needs_onednn = pytest.mark.skipif(
    not packing_available(), reason="this torch build has no working oneDNN linear ops: only the fallback can run"
)
ALL_IDS = list(tiny_configs())
BOTTLENECK_IDS = ["ib_bert", "mobilebert", "mobilebert_tiny", "mobilebert_wo_opt"]
LABELS = torch.tensor([0, 1, 0])


@pytest.fixture(autouse=True)
def _fuse_tiny_layers(monkeypatch):
    """The tiny test models' products are far below the size from which fusing pays: fuse them anyway, to test it
    (``test_small_products_call_the_modules`` checks the threshold itself)."""
    monkeypatch.setattr(fused_linear_module, "MIN_FUSED_MULTIPLY_ADDS", 0)


def _classifier(config_id: str, **fields):
    model = tiny_classifier(config_id, **fields)
    # Weights and NoNorm scales well away from the init, so that a stale copy changes the logits visibly.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.normal_(mean=1.0 if name.endswith("LayerNorm.weight") else 0.0, std=0.2)
    return model


def _logits(model, packing: bool = True, **batch) -> torch.Tensor:
    """The last hidden states and the logits, side by side: with weights this large the pooler's tanh saturates,
    and logits alone would not show a changed encoder."""
    model.eval()
    with torch.no_grad(), weight_packing(packing):
        outputs = model(**(batch or random_batch()), output_hidden_states=True)
    return torch.cat([outputs.hidden_states[-1].flatten(), outputs.logits.flatten()])


def _dense_weight_bytes(model) -> int:
    return sum(m.weight.numel() * m.weight.element_size() for m in model.modules() if type(m) is nn.Linear)


@needs_onednn
@pytest.mark.parametrize("config_id", ALL_IDS)
def test_every_family_gives_the_plain_outputs_on_packed_fused_layers(config_id):
    model = _classifier(config_id)
    plain = _logits(model, packing=False)
    assert packed_weight_bytes(model) == 0
    torch.testing.assert_close(_logits(model), plain, rtol=1e-5, atol=1e-5)
    assert packed_weight_bytes(model) > 0.5 * _dense_weight_bytes(model)  # the encoder's linears were packed
    with torch.inference_mode():
        other_shape = random_batch(batch=2, seq=7, pad_from=None)
        packed = model(**other_shape, output_hidden_states=True)
        packed = torch.cat([packed.hidden_states[-1].flatten(), packed.logits.flatten()])
        torch.testing.assert_close(packed, _logits(model, packing=False, **other_shape), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_the_joined_and_fused_calls_equal_the_modules_they_replace():
    torch.manual_seed(0)
    query, key, value = (nn.Linear(24, width) for width in (16, 16, 8))
    key.bias = None
    inputs, residual = torch.randn(2, 5, 24), torch.randn(2, 5, 16)
    with torch.no_grad():
        for layer in (query, key, value):
            layer.eval()
        joined = joined_linear((query, key, value), inputs)
        for part, layer in zip(joined, (query, key, value)):
            torch.testing.assert_close(part, layer(inputs), rtol=1e-6, atol=1e-6)
        for activation in (nn.ReLU(), fused_linear_module.GELUActivation(), nn.Tanh(), None):
            for add in (None, residual):
                expected = query(inputs) if activation is None else activation(query(inputs))
                expected = expected if add is None else expected + add
                result = fused_linear(query, inputs, activation=activation, residual=add)
                torch.testing.assert_close(result, expected, rtol=1e-6, atol=1e-6)
    assert packed_weight_bytes(nn.ModuleList([query, key, value])) > 0


@needs_onednn
@pytest.mark.parametrize("config_id", ["mobilebert", "ib_bert", "minilm_dense"])
def test_distillation_hooks_on_query_key_value_still_record_at_inference(config_id):
    """A frozen teacher runs in eval mode under no_grad: exactly where the fused path applies. The relation losses
    read Q/K/V through forward hooks on those modules, so they must still be called."""
    model = AutoModel.from_config(tiny_configs()[config_id]).eval()
    names = {signal: signal_module_name(signal, 1) for signal in ("query", "key", "value", "attention_norm")}
    recorded = {}
    for packing in (True, False):
        with torch.no_grad(), weight_packing(packing), SubmoduleRecorder(model, names) as recorder:
            model(**random_batch())
        recorded[packing] = dict(recorder.outputs)
    for signal in names:
        torch.testing.assert_close(recorded[True][signal], recorded[False][signal], rtol=0, atol=0)


@needs_onednn
def test_a_replaced_forward_or_a_global_hook_is_respected():
    model = _classifier("mobilebert")
    expected = _logits(model, packing=False)
    calls = []
    query = model.base_model.encoder.layer[0].attention.self.query
    original = query.forward
    query.forward = lambda inputs: calls.append("query") or original(inputs)  # as Accelerate's hooks do
    torch.testing.assert_close(_logits(model), expected, rtol=1e-5, atol=1e-5)
    assert calls == ["query"]
    del query.forward
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, output: seen.append(module))
    try:
        _logits(model)
    finally:
        handle.remove()
    assert sum(type(module) is nn.Linear for module in seen) == sum(type(m) is nn.Linear for m in model.modules())


@needs_onednn
@pytest.mark.parametrize("config_id", BOTTLENECK_IDS)
def test_training_and_gradients_run_the_plain_modules_bit_for_bit(config_id):
    model = _classifier(config_id).train()
    torch.manual_seed(3)
    default = model(**random_batch(), labels=LABELS).loss
    torch.manual_seed(3)
    with weight_packing(False):
        plain = model(**random_batch(), labels=LABELS).loss
    assert torch.equal(default, plain)
    model.eval()
    with torch.enable_grad():
        model(**random_batch())
    assert packed_weight_bytes(model) == 0


@needs_onednn
@pytest.mark.parametrize("config_id", ["mobilebert", "vanilla_bert"])
def test_an_optimizer_step_load_state_dict_and_a_data_edit_repack(config_id):
    model, other = _classifier(config_id), _classifier(config_id)
    before = _logits(model)
    sgd_step(model, LABELS)
    after = _logits(model)
    assert (after - before).abs().max() > 1e-3
    torch.testing.assert_close(after, _logits(model, packing=False), rtol=1e-5, atol=1e-5)
    model.load_state_dict(other.state_dict())
    torch.testing.assert_close(_logits(model), _logits(other, packing=False), rtol=1e-5, atol=1e-5)
    # In place through .data (PEFT's merge does this): the version counter does not move, the sampled values do.
    layer = model.base_model.encoder.layer[0]
    layer.attention.self.key.weight.data += 0.3 * torch.randn_like(layer.attention.self.key.weight)
    layer.attention.self.key.bias.data += 0.3
    torch.testing.assert_close(_logits(model), _logits(model, packing=False), rtol=1e-5, atol=1e-5)


@needs_onednn
@pytest.mark.parametrize("config_id", ["mobilebert", "ib_bert", "minilm_dense"])
def test_peft_lora_layers_run_unpacked_then_merge_and_repack(config_id):
    model = _classifier(config_id)
    _logits(model)  # packed copies of the base weights exist now
    peft_model = get_peft_model(model, build_peft_config("lora", model))
    peft_model.train()
    trainable = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.5)
    for parameter in trainable:  # LoRA's B starts at zero: give the adapter an effect to test
        if parameter.dim() == 2:
            parameter.data.normal_(std=0.2)
    peft_model(**random_batch(), labels=LABELS).loss.backward()
    optimizer.step()
    adapted = _logits(peft_model)
    torch.testing.assert_close(adapted, _logits(peft_model, packing=False), rtol=1e-5, atol=1e-5)
    merged = peft_model.merge_and_unload()
    torch.testing.assert_close(_logits(merged), adapted, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(_logits(merged), _logits(merged, packing=False), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_layers_are_packed_once_across_calls_until_they_change(monkeypatch):
    packs = []
    original_pack = packed_weights._pack_group

    def counting_pack(linears, parameters):
        packs.append(len(linears))
        return original_pack(linears, parameters)

    monkeypatch.setattr(packed_weights, "_pack_group", counting_pack)
    model = _classifier("mobilebert")
    for _ in range(3):
        _logits(model)
    first = len(packs)
    # Per layer: the two input bottlenecks joined, query+key joined, value, attention output, 2 per stacked FFN,
    # intermediate, output, output bottleneck.
    per_layer = 4 + 2 * (model.config.num_feedforward_networks - 1) + 3
    assert first == per_layer * model.config.num_hidden_layers
    with torch.no_grad():
        model.base_model.encoder.layer[1].output.dense.weight.mul_(0.5)
    _logits(model)
    assert len(packs) == first + 1


@needs_onednn
def test_bfloat16_and_the_config_switch_run_the_plain_modules():
    model = _classifier("mobilebert").to(torch.bfloat16)
    _logits(model)
    assert packed_weight_bytes(model) == 0
    model = _classifier("minilm_dense", pack_inference_weights=False)
    _logits(model)
    assert packed_weight_bytes(model) == 0


def test_without_working_private_ops_the_plain_modules_run(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("forced: no oneDNN linear here")

    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", refuse)  # any call would fail the forward
    monkeypatch.setattr(packed_weights, "_onednn_ops", lambda: SimpleNamespace(unary=refuse, binary=refuse))
    monkeypatch.setattr(packed_weights, "packing_available", packed_weights.packing_available.__wrapped__)
    for config_id in ("mobilebert", "minilm_dense"):
        model = _classifier(config_id)
        torch.testing.assert_close(_logits(model), _logits(model, packing=False), rtol=0, atol=0)
        assert packed_weight_bytes(model) == 0


def test_the_bottleneck_config_validates_the_switch():
    from compact_bert.configuration import CompactMobileBertConfig

    with pytest.raises(ValueError, match="pack_inference_weights.*True or False.*'yes'"):
        CompactMobileBertConfig(pack_inference_weights="yes")


@needs_onednn
def test_small_products_call_the_modules_and_large_ones_fuse(monkeypatch):
    monkeypatch.setattr(fused_linear_module, "MIN_FUSED_MULTIPLY_ADDS", 1 << 25)
    linear = nn.Linear(128, 512).eval()
    calls = []
    linear.register_forward_hook(lambda module, args, output: calls.append(args[0].shape[0]))
    small, large = torch.randn(128, 128), torch.randn(512, 128)  # 8.4M and 33.6M multiply-adds (2**25)
    with torch.no_grad():
        hooked = fused_linear(linear, small, activation=nn.ReLU())
        assert calls == [128]  # the module was called (and its hook fired)
    linear._forward_hooks.clear()
    with torch.no_grad():
        assert packed_weight_bytes(linear) == 0
        torch.testing.assert_close(fused_linear(linear, large, activation=nn.ReLU()), torch.relu(linear(large)))
        torch.testing.assert_close(hooked, torch.relu(linear(small)), rtol=0, atol=0)
    assert packed_weight_bytes(linear) > 0


def test_hooks_on_the_bottleneck_layers_fire_in_training_and_skip_fusion_at_inference():
    model = _classifier("mobilebert")
    bottleneck = model.base_model.encoder.layer[0].bottleneck
    calls = []
    for layer in (bottleneck.input, bottleneck.attention):
        layer.register_forward_hook(lambda module, args, output: calls.append(module))
    model.train()
    model(**random_batch(), labels=LABELS)
    assert calls == [bottleneck.input, bottleneck.attention]
    calls.clear()
    torch.testing.assert_close(_logits(model), _logits(model, packing=False), rtol=1e-5, atol=1e-5)
    assert calls == [bottleneck.input, bottleneck.attention] * 2  # called, not fused, with packing on and off


REMOTE_CHILD = BLOCK_COMPACT_BERT + textwrap.dedent(
    """
    import torch
    from transformers import AutoModelForSequenceClassification

    folder, reference_path = sys.argv[1], sys.argv[2]
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
    bundle = sys.modules[type(model).__module__]
    bundle.MIN_FUSED_MULTIPLY_ADDS = 0  # the tiny model's products: fuse them anyway
    reference = torch.load(reference_path)
    with torch.inference_mode():
        logits = model(**reference["inputs"]).logits
    torch.testing.assert_close(logits, reference["expected"], rtol=1e-5, atol=1e-5)
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    experts = len(getattr(bundle, "_PACKED_COPIES", {}))  # a dense family's bundle ships no MoE code at all
    print("groups", sum(len(groups) for groups in bundle._PACKED_GROUPS.values()), "experts", experts)
    """
)


@needs_onednn
@pytest.mark.parametrize(("config_id", "expected_experts"), [("mobilebert", 0), ("minimoe", 4)])
def test_a_remote_code_folder_runs_the_fused_layers_without_compact_bert(tmp_path, config_id, expected_experts):
    """A user's script that never imports compact-bert gets the packed and fused inference path from the two
    bundled code files, with the plain path's outputs."""
    model = _classifier(config_id)
    model.save_pretrained(tmp_path / "folder")
    batch = random_batch()
    with torch.no_grad(), weight_packing(False):
        torch.save({"inputs": batch, "expected": model(**batch).logits}, tmp_path / "reference.pt")
    (tmp_path / "child.py").write_text(REMOTE_CHILD)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "child.py", str(tmp_path / "folder"), str(tmp_path / "reference.pt")],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    groups, experts = (int(word) for word in result.stdout.split()[1::2])
    per_layer = 4 + 2 * (model.config.num_feedforward_networks - 1) + 3 if config_id == "mobilebert" else 2
    assert groups == per_layer * model.config.num_hidden_layers  # every dense layer ran fused
    assert experts == expected_experts  # fc1 and fc2 of each MoE block, packed
