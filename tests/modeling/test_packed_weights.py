"""Expert weights packed once for oneDNN at inference: same outputs as the plain path, rebuilt whenever the
weights change (optimizer step, ``load_state_dict``, PEFT merge), never used in training, and the plain path
whenever the private ops are missing or packing is switched off."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from peft import get_peft_model
from transformers import AutoModelForSequenceClassification

from compact_bert.configuration import MiniMoEConfig
from compact_bert.finetuning.peft_support import build_peft_config
from compact_bert.modeling.implementation_selection import selected_implementations
from compact_bert.modeling.packed_weight_memory import packed_weight_bytes, release_packed_weights
from compact_bert.modeling.packed_weights import packing_available
from tests.conftest import generated_file, random_batch, sgd_step, tiny_classifier

MOE_IDS = ["minimoe", "minimoe_moe_attention", "moe_bert"]
LABELS = torch.tensor([0, 1, 0])
needs_onednn = pytest.mark.skipif(
    not packing_available(), reason="this torch build has no working oneDNN linear ops: only the fallback can run"
)


def _classifier(config_id: str, **fields):
    model = tiny_classifier(config_id, **fields)
    # Larger expert weights than the init's 0.02, so that a stale packed copy changes the logits visibly.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "experts" in name or "attention.self" in name:
                parameter.normal_(std=0.2)
    return model


def _implementations(model, packing: bool = True):
    """The oneDNN implementations (packed weights) or the plain ones (``nn.Linear`` modules, per-expert loop)."""
    name = "onednn" if packing else "eager"
    return selected_implementations(model, dense=name, moe=name)


def _logits(model, packing: bool = True) -> torch.Tensor:
    model.eval()
    with torch.no_grad(), _implementations(model, packing):
        return model(**random_batch()).logits


def _expert_weight_bytes(model) -> int:
    """Bytes of every stacked ``[experts, out, in]`` weight (MoE FFN and MoE attention)."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.dim() == 3)


@needs_onednn
@pytest.mark.parametrize("config_id", MOE_IDS)
def test_packed_inference_equals_the_plain_path_and_reports_its_memory(config_id):
    model = _classifier(config_id)
    plain = _logits(model, packing=False)
    assert packed_weight_bytes(model) == 0
    packed = _logits(model)
    torch.testing.assert_close(packed, plain, rtol=0, atol=1e-5)
    assert packed_weight_bytes(model) >= _expert_weight_bytes(model) > 0
    with torch.inference_mode():
        torch.testing.assert_close(model(**random_batch()).logits, plain, rtol=0, atol=1e-5)
    release_packed_weights(model)
    assert packed_weight_bytes(model) == 0


@needs_onednn
def test_a_model_with_packed_copies_still_deep_copies_and_saves(tmp_path):
    model = _classifier("minimoe_moe_attention")
    expected = _logits(model)
    clone = copy.deepcopy(model)
    assert packed_weight_bytes(clone) == 0  # the copies are not part of the module
    torch.testing.assert_close(_logits(clone), expected, rtol=0, atol=0)
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    torch.testing.assert_close(_logits(reloaded), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("grad_enabled", [True, False])
def test_training_mode_and_gradients_never_use_packed_copies(grad_enabled):
    model = _classifier("minimoe_moe_attention")
    model.train()
    torch.manual_seed(3)
    with torch.set_grad_enabled(grad_enabled):
        default = model(**random_batch(), labels=LABELS).loss
    torch.manual_seed(3)
    # What "auto" runs in training: the plain dense modules, the grouped GEMM for the experts (where it runs).
    with torch.set_grad_enabled(grad_enabled), selected_implementations(model, dense="eager", moe="grouped_mm"):
        plain = model(**random_batch(), labels=LABELS).loss
    assert torch.equal(default, plain)  # bit for bit: training numerics are unchanged
    with _implementations(model):  # oneDNN selected: in training it runs the plain path all the same
        torch.manual_seed(3)
        with torch.set_grad_enabled(grad_enabled):
            forced = model(**random_batch(), labels=LABELS).loss
    torch.manual_seed(3)
    with torch.set_grad_enabled(grad_enabled), _implementations(model, packing=False):
        loop = model(**random_batch(), labels=LABELS).loss
    assert torch.equal(forced, loop)
    model.eval()
    with torch.enable_grad():
        model(**random_batch())
    assert packed_weight_bytes(model) == 0


@needs_onednn
def test_an_optimizer_step_repacks():
    model = _classifier("minimoe_moe_attention")
    before = _logits(model)
    sgd_step(model, LABELS)
    after = _logits(model)
    assert (after - before).abs().max() > 1e-3
    torch.testing.assert_close(after, _logits(model, packing=False), rtol=0, atol=1e-5)


@needs_onednn
def test_load_state_dict_repacks():
    model, other = _classifier("moe_bert"), _classifier("moe_bert")
    _logits(model)
    model.load_state_dict(other.state_dict())
    torch.testing.assert_close(_logits(model), _logits(other, packing=False), rtol=0, atol=1e-5)


@needs_onednn
def test_an_edit_through_param_data_repacks():
    """``param.data += x`` (PEFT's merge) bypasses the version counter; the sampled values see it."""
    model = _classifier("minimoe")
    _logits(model)
    for name, parameter in model.named_parameters():
        if "experts.fc1_weight" in name:
            parameter.data += 0.05 * torch.randn_like(parameter)
    torch.testing.assert_close(_logits(model), _logits(model, packing=False), rtol=0, atol=1e-5)


@needs_onednn
@pytest.mark.parametrize("config_id", ["minimoe", "minimoe_moe_attention"])
def test_peft_expert_lora_runs_unpacked_then_merges_and_repacks(config_id):
    model = _classifier(config_id)
    _logits(model)  # packed copies of the base weights exist now
    peft_model = get_peft_model(model, build_peft_config("lora", model))
    peft_model.train()
    optimizer = torch.optim.SGD([p for p in peft_model.parameters() if p.requires_grad], lr=0.5)
    peft_model(**random_batch(), labels=LABELS).loss.backward()
    optimizer.step()
    adapted = _logits(peft_model)  # LoRA on target_parameters computes the weight: the plain path
    torch.testing.assert_close(adapted, _logits(peft_model, packing=False), rtol=0, atol=1e-5)
    merged = peft_model.merge_and_unload()
    torch.testing.assert_close(_logits(merged), adapted, rtol=0, atol=1e-5)
    torch.testing.assert_close(_logits(merged), _logits(merged, packing=False), rtol=0, atol=1e-5)


@pytest.mark.parametrize("how", ["no_onednn", "op_fails"])
def test_without_working_private_ops_the_plain_path_runs(monkeypatch, how):
    def refuse(*args, **kwargs):
        raise RuntimeError("forced: no oneDNN linear here")

    if how == "no_onednn":
        monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", refuse)  # any call would fail the forward
    model = _classifier("minimoe_moe_attention")
    code = generated_file(model)
    monkeypatch.setattr(code, "_onednn_ops", lambda: SimpleNamespace(unary=refuse, binary=refuse))
    monkeypatch.setattr(code, "packing_available", code.packing_available.__wrapped__)
    with torch.no_grad(), _implementations(model, packing=False):
        plain = model(**random_batch()).logits
    torch.testing.assert_close(_logits(model), plain, rtol=0, atol=0)
    assert packed_weight_bytes(model) == 0


def test_the_eager_implementations_and_turning_onednn_off_disable_packing_and_the_fields_are_validated():
    model = _classifier("moe_bert", dense_implementation="eager", moe_implementation="eager")
    model.eval()
    with torch.no_grad():
        model(**random_batch())
    assert packed_weight_bytes(model) == 0
    model = _classifier("moe_bert")
    with torch.backends.mkldnn.flags(enabled=False):
        _logits(model)
    assert packed_weight_bytes(model) == 0
    with pytest.raises(ValueError, match="moe_implementation.*one of.*'grouped_mm'.*'packed'"):
        MiniMoEConfig(moe_implementation="packed")
    # Configs saved before the implementation fields: ``pack_inference_weights`` is read, and checked.
    legacy = MiniMoEConfig(pack_inference_weights=False)
    assert (legacy.dense_implementation, legacy.moe_implementation) == ("eager", "eager")
    assert "pack_inference_weights" not in legacy.to_dict()
    assert MiniMoEConfig(pack_inference_weights=True).moe_implementation == "auto"
    with pytest.raises(ValueError, match="pack_inference_weights.*True or False.*'no'"):
        MiniMoEConfig(pack_inference_weights="no")
    with pytest.raises(ValueError, match="moe_implementation='loop'.*valid: auto, batched, eager, grouped_mm, onednn"):
        model.config.moe_implementation = "loop"  # set after construction: the forward names it
        model(**random_batch())
    with (
        pytest.raises(ValueError, match="moe_implementation='loop'.*valid"),
        selected_implementations(model, moe="loop"),
    ):
        pass


@needs_onednn
def test_weights_are_packed_once_across_calls_until_they_change(monkeypatch):
    packs = []
    model = _classifier("minimoe")
    code = generated_file(model)
    original_pack = code._pack
    monkeypatch.setattr(code, "_pack", lambda weight: packs.append(weight.shape) or original_pack(weight))
    for _ in range(3):
        _logits(model)
        with torch.inference_mode():
            model(**random_batch())
    assert len(packs) == 2 * model.config.num_hidden_layers  # fc1 and fc2 of each MoE block, once
    with torch.no_grad():
        next(p for name, p in model.named_parameters() if "fc2_weight" in name).mul_(0.5)
    _logits(model)
    assert len(packs) == 2 * model.config.num_hidden_layers + 1


def test_cpu_autocast_keeps_its_semantics_and_the_probe_is_not_fooled_by_it():
    """Accelerate evaluates under CPU autocast with bf16: the experts must compute as F.linear does there (the
    packed op is fp32), and the once-per-process availability probe must not be the first thing to run inside it
    (it compared a bf16 F.linear with the fp32 op and raised "Float did not match BFloat16")."""
    model = _classifier("minimoe")
    code = generated_file(model)
    code.packing_available.cache_clear()
    batch = random_batch(2, 12)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        available_inside_autocast = code.packing_available()
        autocast_logits = model(**batch).logits
        with _implementations(model, packing=False):
            plain_logits = model(**batch).logits
    assert autocast_logits.dtype == plain_logits.dtype
    torch.testing.assert_close(autocast_logits, plain_logits, rtol=0, atol=0)
    code.packing_available.cache_clear()
    assert available_inside_autocast == code.packing_available()
