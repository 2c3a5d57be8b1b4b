"""The dense implementations (``modeling/dense_implementations.py``) of every family: oneDNN's packed weights with
bias, activation and residual fused into the GEMM and projections of one input joined, against the plain modules
(``"eager"``). Same outputs; training runs the modules bit for bit; hooks see their calls where the recorder or the
user selects ``"eager"``; PEFT's wrapped layers and Accelerate's offloaded weights run as those libraries wrote them;
copies follow every change of the weights; ``"auto"`` fuses from the size the machine probe measured."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch
from accelerate import cpu_offload
from peft import get_peft_model
from torch import nn
from transformers import AutoModel

from compact_bert.finetuning.peft_support import build_peft_config
from compact_bert.modeling import dense_implementations, implementation_probe
from compact_bert.modeling.dense_implementations import ALL_DENSE_IMPLEMENTATIONS, DenseShape
from compact_bert.modeling.implementation_selection import selected_implementations
from compact_bert.modeling.packed_weight_memory import packed_weight_bytes
from compact_bert.modeling.packed_weights import packing_available
from compact_bert.modeling.signals import SubmoduleRecorder, signal_module_name
from tests.conftest import generated_file, random_batch, sgd_step, tiny_classifier, tiny_configs
from tests.remote_code_helpers import BLOCK_COMPACT_BERT

needs_onednn = pytest.mark.skipif(
    not packing_available(), reason="this torch build has no working oneDNN linear ops: only the fallback can run"
)
ALL_IDS = list(tiny_configs())
BOTTLENECK_IDS = ["ib_bert", "mobilebert", "mobilebert_tiny", "mobilebert_wo_opt"]
LABELS = torch.tensor([0, 1, 0])


FUSED = ALL_DENSE_IMPLEMENTATIONS["onednn"]
EAGER = ALL_DENSE_IMPLEMENTATIONS["eager"]


def _classifier(config_id: str, **fields):
    """The tiny test models' products are far below the size from which ``"auto"`` fuses: ``"onednn"`` fuses them
    anyway, to test it (``test_auto_calls_the_modules_below_the_probed_size_and_fuses_above`` checks ``"auto"``)."""
    model = tiny_classifier(config_id, dense_implementation="onednn", **fields)
    # Weights and NoNorm scales well away from the init, so that a stale copy changes the logits visibly.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.normal_(mean=1.0 if name.endswith("LayerNorm.weight") else 0.0, std=0.2)
    return model


def _logits(model, packing: bool = True, **batch) -> torch.Tensor:
    """The last hidden states and the logits, side by side: with weights this large the pooler's tanh saturates,
    and logits alone would not show a changed encoder."""
    model.eval()
    name = "onednn" if packing else "eager"
    with torch.no_grad(), selected_implementations(model, dense=name, moe=name, missing_ok=True):
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
        joined = FUSED.joined((query, key, value), inputs)
        for part, layer in zip(joined, (query, key, value)):
            torch.testing.assert_close(part, layer(inputs), rtol=1e-6, atol=1e-6)
        for activation in (nn.ReLU(), dense_implementations.GELUActivation(), nn.Tanh(), None):
            for add in (None, residual):
                expected = query(inputs) if activation is None else activation(query(inputs))
                expected = expected if add is None else expected + add
                result = FUSED.linear(query, inputs, activation=activation, residual=add)
                torch.testing.assert_close(result, expected, rtol=1e-6, atol=1e-6)
    assert packed_weight_bytes(nn.ModuleList([query, key, value])) > 0


@needs_onednn
@pytest.mark.parametrize("config_id", ["mobilebert", "ib_bert", "minilm_dense"])
def test_distillation_hooks_on_query_key_value_record_at_inference_with_oneDNN_selected(config_id):
    """A frozen teacher runs in eval mode under no_grad: exactly where the fused path applies. The relation losses
    read Q/K/V through forward hooks on those modules: the recorder selects the eager modules while it records, and
    gives the model its own selection back after."""
    config = copy.deepcopy(tiny_configs()[config_id])
    config.dense_implementation = "onednn"
    model = AutoModel.from_config(config).eval()
    assert model.config.dense_implementation == "onednn"
    names = {signal: signal_module_name(signal, 1) for signal in ("query", "key", "value", "attention_norm")}
    with torch.no_grad(), SubmoduleRecorder(model, names) as recorder:
        model(**random_batch())
        assert model.config.dense_implementation == "eager"
    assert model.config.dense_implementation == "onednn"
    assert set(recorder.outputs) == set(names)
    with torch.no_grad(), selected_implementations(model, dense="eager"):
        expected = model(**random_batch()).last_hidden_state
    with torch.no_grad():
        torch.testing.assert_close(model(**random_batch()).last_hidden_state, expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_oneDNN_computes_without_calling_the_modules_and_eager_calls_every_one():
    """The documented difference, as under SDPA attention: a hook on a projection fires under ``"eager"``, not
    under ``"onednn"``, which no longer looks for hooks on every call."""
    model = _classifier("mobilebert")
    encoder_linears = [m for m in model.base_model.encoder.modules() if type(m) is nn.Linear]
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, output: seen.append(module))
    try:
        _logits(model, packing=False)
        plain_calls = sum(any(module is linear for linear in encoder_linears) for module in seen)
        seen.clear()
        _logits(model)
    finally:
        handle.remove()
    assert plain_calls == len(encoder_linears)
    assert not any(module is linear for linear in encoder_linears for module in seen)


@needs_onednn
@pytest.mark.parametrize("config_id", ["mobilebert", "minimoe"])
def test_accelerates_offloaded_weights_run_the_modules_through_its_hooks(config_id):
    """``cpu_offload`` keeps the weights on the meta device and loads each module's in its pre-forward hook: the
    oneDNN implementations see no CPU weight to pack and call the modules, whose hooks load them."""
    model = _classifier(config_id, moe_implementation="onednn") if config_id == "minimoe" else _classifier(config_id)
    batch = random_batch()
    expected = _logits(model, packing=False, **batch)
    offloaded = cpu_offload(model, execution_device="cpu")
    assert all(p.device.type == "meta" for p in offloaded.base_model.encoder.parameters())
    with torch.no_grad():
        outputs = offloaded(**batch, output_hidden_states=True)
    torch.testing.assert_close(
        torch.cat([outputs.hidden_states[-1].flatten(), outputs.logits.flatten()]), expected, rtol=1e-5, atol=1e-5
    )


@needs_onednn
@pytest.mark.parametrize("config_id", BOTTLENECK_IDS)
def test_training_and_gradients_run_the_plain_modules_bit_for_bit(config_id):
    model = _classifier(config_id).train()
    torch.manual_seed(3)
    default = model(**random_batch(), labels=LABELS).loss
    torch.manual_seed(3)
    with selected_implementations(model, dense="eager"):
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
    model = _classifier("mobilebert")
    original_pack = generated_file(model)._pack_group

    def counting_pack(linears, parameters):
        packs.append(len(linears))
        return original_pack(linears, parameters)

    monkeypatch.setattr(generated_file(model), "_pack_group", counting_pack)
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
def test_bfloat16_and_the_eager_selection_run_the_plain_modules():
    model = _classifier("mobilebert").to(torch.bfloat16)
    _logits(model)
    assert packed_weight_bytes(model) == 0
    model = _classifier("minilm_dense")
    model.config.dense_implementation = "eager"
    with torch.no_grad():
        model(**random_batch())
    assert packed_weight_bytes(model) == 0


def test_without_working_private_ops_the_plain_modules_run(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("forced: no oneDNN linear here")

    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", refuse)  # any call would fail the forward
    for config_id in ("mobilebert", "minilm_dense"):
        model = _classifier(config_id)
        code = generated_file(model)
        monkeypatch.setattr(code, "_onednn_ops", lambda: SimpleNamespace(unary=refuse, binary=refuse))
        monkeypatch.setattr(code, "packing_available", code.packing_available.__wrapped__)
        torch.testing.assert_close(_logits(model), _logits(model, packing=False), rtol=0, atol=0)
        assert packed_weight_bytes(model) == 0


def test_the_bottleneck_config_validates_the_field_and_reads_the_legacy_switch():
    from compact_bert.configuration import CompactMobileBertConfig

    with pytest.raises(ValueError, match="dense_implementation.*one of.*'onednn'.*'fused'"):
        CompactMobileBertConfig(dense_implementation="fused")
    with pytest.raises(ValueError, match="pack_inference_weights.*True or False.*'yes'"):
        CompactMobileBertConfig(pack_inference_weights="yes")
    assert CompactMobileBertConfig(pack_inference_weights=False).dense_implementation == "eager"
    assert CompactMobileBertConfig().dense_implementation == "auto"


@needs_onednn
def test_auto_fuses_the_shapes_the_machines_probe_measured_to_pay(monkeypatch, tmp_path):
    """``"auto"`` asks the probe once per call shape (rows rounded up to a power of two), then remembers; here the
    probe's measurement is replaced: fusing a 512-wide ReLU projection clearly pays (0.5x), which overrides the
    2^25 rule at these 8.4M multiply-adds; a residual add measured 1.5x stays plain."""
    monkeypatch.setenv("COMPACT_BERT_CACHE", str(tmp_path))
    monkeypatch.delenv("COMPACT_BERT_PROBE", raising=False)
    measured = []

    def measure(shape):
        measured.append(shape)
        return 0.5 if shape.epilogue == "relu" else 1.5

    monkeypatch.setattr(dense_implementations, "_measure_fusion", measure)
    implementation_probe.forget_probed_choices()
    config = SimpleNamespace(dense_implementation="auto")
    linear = nn.Linear(128, 512).eval()
    calls = []
    linear.register_forward_hook(lambda module, args, output: calls.append(args[0].shape[0]))
    inputs, residual = torch.randn(100, 128), torch.randn(100, 512)
    try:
        with torch.no_grad():
            plain_relu, plain_residual = torch.relu(linear(inputs)), linear(inputs) + residual
            calls.clear()
            for _ in range(2):
                fused = dense_implementations.dense_linear(config, linear, inputs, activation=nn.ReLU())
                assert calls == [] and packed_weight_bytes(linear) > 0  # fused: the module was not called
                unfused = dense_implementations.dense_linear(config, linear, inputs, residual=residual)
                assert calls == [100]  # called as usual (its hook fired)
                calls.clear()
            dense_implementations.dense_linear(config, linear, inputs[:90], activation=nn.ReLU())  # same bucket
    finally:
        implementation_probe.forget_probed_choices()
    assert measured == [DenseShape("relu", 128, 512, 1, 128), DenseShape("residual", 128, 512, 1, 128)]
    torch.testing.assert_close(fused, plain_relu, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(unfused, plain_residual, rtol=0, atol=0)


@needs_onednn
def test_the_probe_measures_a_shape_once_and_only_a_clear_ratio_overrides_the_size_rule(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPACT_BERT_CACHE", str(tmp_path))
    monkeypatch.delenv("COMPACT_BERT_PROBE", raising=False)
    implementation_probe.forget_probed_choices()
    shape = DenseShape("gelu", 384, 1536, 1, 32)
    try:
        verdict = dense_implementations.probed_fusion(shape)  # measured for real
        saved = json.loads(implementation_probe.probe_file().read_text())[implementation_probe.machine_key()]
        assert saved.keys() == {"dense gelu 384x1536/1 rows 32"}
        ratio = saved["dense gelu 384x1536/1 rows 32"]
        assert 0 < ratio < 100 and verdict == (ratio <= 0.90)  # 18.9M multiply-adds: below 2^25, fused if clear
        assert dense_implementations.probed_fusion(DenseShape("none", 1024, 4096, 1, 128))  # 2^29: fused, unmeasured
        below, above = DenseShape("relu", 128, 512, 1, 256), DenseShape("relu", 128, 512, 1, 512)  # 2^24, 2^25
        for ratio, expected in (
            (0.85, (True, True)),
            (0.95, (False, True)),
            (1.05, (False, True)),
            (1.2, (False, False)),
        ):
            for probed in (below, above):
                implementation_probe.record_probe(f"dense relu 128x512/1 rows {probed.rows}", ratio)
            implementation_probe.forget_probed_choices()
            assert (dense_implementations.probed_fusion(below), dense_implementations.probed_fusion(above)) == expected
        monkeypatch.setenv("COMPACT_BERT_PROBE", "off")
        implementation_probe.forget_probed_choices()
        assert dense_implementations.probed_fusion(above)  # 2^25: the rule
        assert not dense_implementations.probed_fusion(below)
    finally:
        implementation_probe.forget_probed_choices()


REMOTE_CHILD = BLOCK_COMPACT_BERT + textwrap.dedent(
    """
    import json

    import torch
    from transformers import AutoModelForSequenceClassification

    folder, reference_path = sys.argv[1], sys.argv[2]
    # The tiny model's products are below the size from which "auto" fuses: select the oneDNN implementations.
    model = AutoModelForSequenceClassification.from_pretrained(
        folder, trust_remote_code=True, dense_implementation="onednn", **json.loads(sys.argv[3])
    ).eval()
    bundle = sys.modules[type(model).__module__]
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
    with torch.no_grad(), selected_implementations(model, dense="eager", missing_ok=True):
        torch.save({"inputs": batch, "expected": model(**batch).logits}, tmp_path / "reference.pt")
    extra = {"moe_implementation": "onednn"} if expected_experts else {}  # a dense family has no such field
    (tmp_path / "child.py").write_text(REMOTE_CHILD)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "child.py", str(tmp_path / "folder"), str(tmp_path / "reference.pt"), json.dumps(extra)],
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
