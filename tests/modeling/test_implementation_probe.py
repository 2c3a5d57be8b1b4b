"""The per-machine probe behind ``"auto"`` (``modeling/implementation_probe.py``): measured once on this machine,
saved with what it was measured on, read back instead of measured again, measured again for another machine,
skipped with ``COMPACT_BERT_PROBE=off``, and a read-only cache costs nothing but the saving."""

from __future__ import annotations

import json

import pytest
import torch

from compact_bert.modeling import grouped_gemm, implementation_probe
from compact_bert.modeling.implementation_probe import machine_key, probe_file, probed_choice
from compact_bert.modeling.implementation_selection import selected_implementations
from compact_bert.modeling.moe_implementations import ALL_MOE_IMPLEMENTATIONS, ExpertShape, probed_expert_kernel
from tests.conftest import forget_probed_choices_everywhere, generated_file, random_batch, tiny_classifier


@pytest.fixture
def probe_cache(monkeypatch, tmp_path):
    """An empty cache, the probe switched on, and nothing remembered by this process."""
    monkeypatch.setenv("COMPACT_BERT_CACHE", str(tmp_path))
    monkeypatch.delenv("COMPACT_BERT_PROBE", raising=False)
    forget_probed_choices_everywhere()
    yield tmp_path
    forget_probed_choices_everywhere()


def test_the_expert_probe_measures_a_shape_once_and_saves_what_it_measured_on(probe_cache):
    shape = ExpertShape(num_experts=4, in_features=64, inner_features=256, out_features=64, tokens=128)
    choice = probed_expert_kernel(shape)
    assert choice in {"eager", "grouped_mm", "onednn"} and choice in ALL_MOE_IMPLEMENTATIONS
    linear_choice = probed_expert_kernel(shape._replace(inner_features=0))  # MoE attention's one map per expert
    saved = json.loads(probe_file().read_text())
    expected = {"experts 4x64>256>64 tokens 128": choice, "experts 4x64>0>64 tokens 128": linear_choice}
    assert saved == {machine_key(): expected}
    assert f"torch {torch.__version__}" in machine_key() and f"{torch.get_num_threads()} threads" in machine_key()


def test_auto_experts_run_what_the_probe_chose_for_the_shape(probe_cache, monkeypatch):
    measured, grouped_calls = [], []
    model = tiny_classifier("minimoe")
    code = generated_file(model)  # the model runs its family file's copy of the probe and the kernels
    monkeypatch.setattr(code, "_measure_expert_kernel", lambda shape: measured.append(shape) or "grouped_mm")
    original = code._grouped
    monkeypatch.setattr(code, "_grouped", lambda *args: grouped_calls.append(1) or original(*args))
    with torch.no_grad():
        default = model(**random_batch()).logits
        model(**random_batch())
        with selected_implementations(model, moe="eager"):
            loop = model(**random_batch()).logits
    config = model.config
    # One shape for every MoE block of the model (the same widths; 3 x 12 tokens: 64), measured once.
    assert measured == [
        ExpertShape(config.num_experts, config.hidden_size, config.expert_intermediate_size, config.hidden_size, 64)
    ]
    assert grouped_calls == [1] * (2 * 2 * config.num_hidden_layers) or not grouped_gemm.grouped_gemm_supported(
        model.base_model.encoder.layer[0].moe.experts.fc1_weight
    )
    torch.testing.assert_close(default, loop, rtol=1e-5, atol=1e-5)


def test_a_saved_answer_is_read_not_measured_and_another_machine_measures_again(probe_cache):
    measured = []

    def measure():
        measured.append(1)
        return 42

    assert probed_choice("answer", measure, 0) == 42
    implementation_probe.forget_probed_choices()  # a new process: only the file remembers
    assert probed_choice("answer", measure, 0) == 42
    assert measured == [1]
    other = {"another CPU | torch 0.0 | 64 threads": {"answer": 7}}
    probe_file().write_text(json.dumps(other))
    implementation_probe.forget_probed_choices()
    assert probed_choice("answer", measure, 0) == 42
    assert measured == [1, 1]
    saved = json.loads(probe_file().read_text())
    assert saved == {**other, machine_key(): {"answer": 42}}  # the other machine's answer is kept


def test_probing_switched_off_uses_the_development_machines_measurements(probe_cache, monkeypatch):
    monkeypatch.setenv("COMPACT_BERT_PROBE", "off")
    assert probed_expert_kernel(ExpertShape(4, 64, 256, 64, 128)) == "onednn"
    assert probed_choice("answer", lambda: 1, "fallback") == "fallback"
    assert not probe_file().exists()


def test_a_corrupt_or_read_only_cache_still_gives_an_answer(probe_cache):
    probe_file().write_text("{not json")
    assert probed_choice("answer", lambda: 3, 0) == 3
    assert json.loads(probe_file().read_text()) == {machine_key(): {"answer": 3}}
    implementation_probe.forget_probed_choices()
    probe_file().unlink()
    probe_cache.chmod(0o500)
    try:
        assert probed_choice("answer", lambda: 5, 0) == 5
    finally:
        probe_cache.chmod(0o700)
