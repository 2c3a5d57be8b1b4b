"""The generated model files as transformers writes its own: a short forward, no loading override, and transformers'
experts interface running a saved MiniMoE in a process that never imports compact-bert."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification

from tests.conftest import random_batch, tiny_configs
from tests.remote_code_helpers import BLOCK_COMPACT_BERT

REPOSITORY = Path(__file__).resolve().parents[2]


def _functions_run(model, batch) -> tuple[set[str], int]:
    """The distinct functions of the model's own file that one forward runs, and how many calls they make."""
    filename = sys.modules[type(model).__module__].__file__
    seen, calls = set(), 0

    def profile(frame, event, argument):
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == filename:
            seen.add(f"{frame.f_code.co_name}:{frame.f_code.co_firstlineno}")
            calls += 1

    sys.setprofile(profile)
    try:
        with torch.no_grad():
            model(**batch)
    finally:
        sys.setprofile(None)
    return seen, calls


@pytest.mark.parametrize("config_id", ["minimoe", "minilm_dense", "mobilebert"])
def test_a_classification_forward_runs_about_as_many_functions_as_transformers_bert(config_id):
    """About as plain as transformers' BERT: a 2-layer MiniMoE classification forward runs at most 25 distinct
    functions of its file (``BertForSequenceClassification``: 13 distinct, 20 calls)."""
    model = AutoModelForSequenceClassification.from_config(tiny_configs()[config_id]).eval()
    assert model.config.num_hidden_layers == 2
    if hasattr(model, "set_experts_implementation") and getattr(model.config, "num_experts", 1) > 1:
        model.set_experts_implementation("eager")  # the file's own expert loop, counted too
    functions, calls = _functions_run(model, random_batch())
    assert len(functions) <= 25, sorted(functions)
    assert calls <= 60, calls


def _source_files() -> list[Path]:
    """The project's Python files: hidden folders (CI's environments in ``.ci/venvs``) and build output pruned."""
    files = []
    for folder, subfolders, names in os.walk(REPOSITORY):
        subfolders[:] = [name for name in subfolders if not name.startswith((".", "__pycache__", "build"))]
        files += [Path(folder) / name for name in names if name.endswith(".py")]
    return files


def test_no_model_class_overrides_from_pretrained():
    overrides = [
        f"{path.relative_to(REPOSITORY)}:{number}"
        for path in _source_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.lstrip().startswith("def from_pretrained(")
    ]
    assert overrides == [] and len(_source_files()) > 100


CHILD = BLOCK_COMPACT_BERT + textwrap.dedent(
    """
    import torch, transformers
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS, grouped_mm_experts_forward

    folder, inputs_file = sys.argv[1], sys.argv[2]
    inputs = torch.load(inputs_file)
    calls = []

    def registered(module, hidden_states, top_k_index, top_k_weights):
        calls.append(top_k_index.shape[0])
        return grouped_mm_experts_forward(module, hidden_states, top_k_index, top_k_weights)

    ALL_EXPERTS_FUNCTIONS.register("users_own", registered)
    outputs = {}
    for implementation in ("eager", "grouped_mm", "batched_mm", "users_own"):
        model = transformers.AutoModel.from_pretrained(
            folder, trust_remote_code=True, experts_implementation=implementation
        ).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        assert model.config._experts_implementation == implementation
        with torch.no_grad():
            outputs[implementation] = model(**inputs).last_hidden_state
    for implementation, output in outputs.items():
        torch.testing.assert_close(output, outputs["eager"], rtol=0, atol=1e-5, msg=implementation)
    assert calls, "the registered function never ran"
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    print("experts implementations agree:", ", ".join(outputs))
    """
)


def test_transformers_experts_interface_runs_a_saved_minimoe_without_compact_bert(tmp_path):
    pytest.importorskip("transformers.integrations.moe", reason="transformers 4.57 has no experts interface")
    from transformers import AutoModel

    model = AutoModel.from_config(tiny_configs()["minimoe"]).eval()
    model.save_pretrained(tmp_path / "model")
    torch.save(random_batch(), tmp_path / "inputs.pt")
    (tmp_path / "child.py").write_text(CHILD)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "model"), str(tmp_path / "inputs.pt")],
        capture_output=True,
        text=True,
        env={"HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "experts implementations agree: eager, grouped_mm, batched_mm, users_own" in result.stdout


def test_the_sources_are_not_imported_at_run_time_one_class_per_model():
    """The modular sources are read by the generator only: a process that imports compact-bert (and its CLI) holds
    one class per model, the generated file's."""
    script = textwrap.dedent(
        """
        import sys
        import compact_bert, compact_bert.cli.main
        from compact_bert.configuration import PRESETS
        from compact_bert.models.minimoe import configuration_minimoe, modeling_minimoe

        sources = sorted(
            name for name in sys.modules
            if name.startswith(("compact_bert.modeling.modular_", "compact_bert.modeling.modeling_", "compact_bert.modeling.shared",
                                "compact_bert.configuration.modular_", "compact_bert.configuration.sparse_bert_base"))
        )
        assert not sources, sources
        assert compact_bert.MiniMoEModel is modeling_minimoe.MiniMoEModel
        assert compact_bert.MiniMoEConfig is configuration_minimoe.MiniMoEConfig is PRESETS["minimoe-4l-384h"][0]
        print("one class per model")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "one class per model" in result.stdout
