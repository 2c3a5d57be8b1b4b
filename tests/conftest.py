"""Shared fixtures: tiny configs of every family, sized so that the whole suite runs fast on 2 CPU cores."""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # pyproject runs one xdist worker per core: a second thread per worker (and per subprocess a test starts)
    # would only oversubscribe the cores, and OpenMP's spinning threads make that much slower than one thread.
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest
import torch

if os.environ.get("OMP_NUM_THREADS") == "1":
    torch.set_num_threads(1)  # in case a plugin imported torch before the variable was set

import compact_bert  # noqa: F401  (registers the Auto classes)
from compact_bert.configuration import (
    CompactMobileBertConfig,
    IBBertConfig,
    MiniMoEConfig,
    MoEBertConfig,
)

VOCAB_SIZE = 128
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def fixed_clock(monkeypatch, measure) -> None:
    """Time the latency budget's models with ``measure`` (a stand-in for ``measure_interleaved`` that reports a fixed
    clock), and build their runners without ``optimize_for_inference``'s own timing of each swap: about a second a
    model on 2 cores, spent on decisions the fixed clock makes moot."""
    import compact_bert.evaluation.runtime_latency as runtime_latency

    eager_runner = runtime_latency.eager_runner
    monkeypatch.setattr(runtime_latency, "measure_interleaved", measure)
    monkeypatch.setattr(
        runtime_latency, "eager_runner", lambda model, inputs, optimize=False: eager_runner(model, inputs, False)
    )


def shared_data(*parts: str) -> Path:
    """A file or folder of the shared data sets, or a skip saying why: CI has ``../shared/data`` beside the
    repository, a user's clone does not."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared data sets sit at ../shared/data beside the repository")
    return path


def needs_shared_data(*files: str):
    """A skip marker for a test (or a module, as ``pytestmark``) that reads ``files`` (paths under ``../shared/data``),
    naming the ones absent: CI has the shared data sets, a user's clone does not."""
    missing = [name for name in files if not SHARED_DATA.joinpath(name).is_file()]
    return pytest.mark.skipif(
        bool(missing), reason=f"{', '.join(missing)} absent: the shared data sets sit at {SHARED_DATA}"
    )


def tiny_configs() -> dict:
    """One tiny config per family and notable variant, keyed by a readable id."""
    common = {"vocab_size": VOCAB_SIZE, "max_position_embeddings": 64, "num_hidden_layers": 2}
    sparse = {**common, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 48}
    bottleneck = {**common, "embedding_size": 16, "num_attention_heads": 4}
    return {
        "ib_bert": IBBertConfig(**bottleneck, hidden_size=32, intra_bottleneck_size=64, intermediate_size=96),
        "mobilebert": CompactMobileBertConfig(
            **bottleneck, hidden_size=32, intra_bottleneck_size=16, intermediate_size=32, num_feedforward_networks=3
        ),
        "mobilebert_tiny": CompactMobileBertConfig(
            **bottleneck,
            hidden_size=32,
            intra_bottleneck_size=16,
            intermediate_size=32,
            num_feedforward_networks=2,
            attention_input="intra_bottleneck",
        ),
        "mobilebert_wo_opt": CompactMobileBertConfig(
            **bottleneck,
            hidden_size=32,
            intra_bottleneck_size=16,
            intermediate_size=32,
            normalization_type="layer_norm",
            hidden_act="gelu",
        ),
        "minimoe": MiniMoEConfig(**sparse, num_experts=4),
        "minimoe_moe_attention": MiniMoEConfig(**sparse, num_experts=4, num_attention_experts=2),
        "minimoe_hash": MiniMoEConfig(**sparse, num_experts=4, router_type="hash"),
        "minilm_dense": MiniMoEConfig(**sparse, num_experts=1),
        "moe_bert": MoEBertConfig(**sparse, num_experts=8),
        "vanilla_bert": MoEBertConfig(**sparse, num_experts=1),
    }


def tiny_classifier(config_id: str, **fields):
    """A sequence classifier in eval mode on a copy of ``tiny_configs()[config_id]`` with ``fields`` set."""
    from transformers import AutoModelForSequenceClassification

    config = copy.deepcopy(tiny_configs()[config_id])
    for name, value in fields.items():
        setattr(config, name, value)
    return AutoModelForSequenceClassification.from_config(config).eval()


def generated_file(model):
    """The generated module (``models/<model_type>/modeling_<model_type>.py``) whose code ``model`` runs."""
    return sys.modules[type(model).__module__]


def sgd_step(model, labels: torch.Tensor, lr: float = 0.5) -> None:
    """One SGD step of ``model`` in train mode on ``random_batch()``: weights that change in place, as training's."""
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model(**random_batch(), labels=labels).loss.backward()
    optimizer.step()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def random_batch(batch: int = 3, seq: int = 12, pad_from: int | None = 8, vocab: int = VOCAB_SIZE) -> dict:
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, vocab, (batch, seq), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    if pad_from is not None:
        attention_mask[-1, pad_from:] = 0
        input_ids[-1, pad_from:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}
