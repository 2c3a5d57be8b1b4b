"""``evaluation.runtime_latency``: interleaved measurement, eager and ONNX Runtime runners on a real export."""

from __future__ import annotations

import itertools
import time

import pytest
import torch

from compact_bert.evaluation.runtime_latency import (
    eager_runner,
    latency_inputs,
    measure_interleaved,
    onnxruntime_runner,
)


def test_measure_orders_runners_by_their_cost_and_reports_p90_at_least_median():
    measured = measure_interleaved(
        {"fast": lambda: time.sleep(0.001), "slow": lambda: time.sleep(0.006)}, rounds=7, warmup=1
    )
    assert 0.9 <= measured["fast"].median_ms < measured["slow"].median_ms
    assert measured["slow"].median_ms >= 5.5
    assert all(latency.p90_ms >= latency.median_ms for latency in measured.values())


def test_each_timed_call_follows_a_call_of_the_same_runner():
    """Another runtime's spinning threads must not land in a timed call: runners alternate in pairs."""
    calls = []
    measure_interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=2, warmup=1)
    assert calls == ["a", "b"] + ["a", "a", "b", "b"] * 2


def test_each_runner_starts_only_after_the_previous_one_settled():
    """A runtime's threads spin on after its call (PyTorch's OpenMP workers for up to ~10 ms): the next runner's
    calls must not start inside that window, or a short call is charged for them (module docstring)."""
    calls = []  # (runner, start, end) of every call, in order
    runners = {name: lambda name=name: calls.append((name, time.perf_counter(), time.perf_counter())) for name in "ab"}
    measure_interleaved(runners, rounds=3, warmup=0, settle_ms=15)
    assert [name for name, _, _ in calls] == ["a", "a", "b", "b"] * 3
    for (previous, _, ended), (name, started, _) in itertools.pairwise(calls):
        if name != previous:  # each runner's untimed call waits the settle time after the other runner's timed one
            assert started - ended >= 0.015


@pytest.mark.parametrize("settle_ms", [0.0, 15.0])
def test_the_settle_time_is_the_one_asked_for_once_per_runner_and_round(monkeypatch, settle_ms):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    measure_interleaved({"a": lambda: None, "b": lambda: None}, rounds=3, warmup=1, settle_ms=settle_ms)
    assert slept == [settle_ms / 1e3] * 6


def test_measure_rejects_zero_rounds_and_a_negative_settle_time():
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        measure_interleaved({"noop": lambda: None}, rounds=0)
    with pytest.raises(ValueError, match="settle_ms=-1"):
        measure_interleaved({"noop": lambda: None}, settle_ms=-1)


def test_inputs_are_reproducible_and_unpadded():
    first, second = latency_inputs(100, 2, 9, seed=3), latency_inputs(100, 2, 9, seed=3)
    assert torch.equal(first["input_ids"], second["input_ids"]) and first["input_ids"].shape == (2, 9)
    assert bool(first["attention_mask"].all()) and not bool(first["token_type_ids"].any())


def test_eager_and_onnxruntime_runners_give_the_same_logits(tmp_path):
    pytest.importorskip("onnxruntime")
    import transformers

    from compact_bert.export.onnx_exporter import export_onnx
    from tests.conftest import tiny_configs

    config = tiny_configs()["minimoe"]
    config.num_labels = 2
    torch.manual_seed(0)
    transformers.AutoModelForSequenceClassification.from_config(config).save_pretrained(tmp_path / "model")
    export_onnx(tmp_path / "model", tmp_path / "onnx", "text-classification", exporter="dynamo")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "model")
    inputs = latency_inputs(config.vocab_size, 1, 12)
    eager_logits = eager_runner(model, inputs)().logits
    onnx_logits = torch.from_numpy(onnxruntime_runner(tmp_path / "onnx" / "model.onnx", inputs, threads=1)()[0])
    torch.testing.assert_close(onnx_logits, eager_logits, atol=1e-4, rtol=0)
