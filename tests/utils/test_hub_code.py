"""The committed generated files (``models/``) equal what their sources generate; the generator ships only what a family
uses and fails clearly, naming file and line, on sources it cannot bundle."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_configs
from tests.remote_code_helpers import BLOCK_COMPACT_BERT
from utils.hub_code import RemoteCodeError, bundle_remote_code, family_files, stale_files

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_committed_remote_code_equals_what_the_sources_generate():
    assert stale_files() == [], "run `python -m utils.hub_code` and commit the result"


def _defined_and_read_names(text: str) -> set[str]:
    tree = ast.parse(text)
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        node.name for node in ast.walk(tree) if isinstance(node, (ast.ClassDef, ast.FunctionDef))
    }


def _imported_roots(text: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            roots.add("." if node.level else node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("config_id", ["ib_bert", "mobilebert", "minimoe", "moe_bert"])
def test_bundle_imports_only_torch_transformers_and_the_standard_library(config_id):
    config_class = type(tiny_configs()[config_id])
    model_type = config_class.model_type
    files = family_files(model_type)
    assert files == family_files(model_type), "bundling must be deterministic"
    configuration, modeling = files[f"configuration_{model_type}.py"], files[f"modeling_{model_type}.py"]
    for text in files.values():
        external = _imported_roots(text) - {"."}
        assert external <= {"__future__", "torch", "transformers"} | set(sys.stdlib_module_names), external
        assert "ast" not in external
        generator_only = {"bundle_remote_code", "SourceIndex", "RemoteCodeError", "import_source"}
        assert not generator_only & _defined_and_read_names(text)
        assert "PRESETS" not in text and "__all__ = [" in text
    assert "." not in _imported_roots(configuration)
    assert f"from .configuration_{model_type} import {config_class.__name__}\n" in modeling
    assert f"class {config_class.__name__}(" not in modeling


@pytest.mark.parametrize("model_type", ["ib_bert", "compact_mobilebert", "minimoe", "moe_bert"])
def test_a_modeling_file_holds_only_the_model_under_its_family_names(model_type):
    """A plain model file: no kernel, probe, cache or file writing; classes named after the family; about 1,000
    lines (fewer than 1,100, the inference-time routing statistics and the input checks included)."""
    modeling = family_files(model_type)[f"modeling_{model_type}.py"]
    for forbidden in (
        "mkldnn",
        "_grouped_mm",
        "json",
        "open(",
        "write_text",
        "perf_counter",
        "Path(",
        "SparseBert",
        "BottleneckBert",
        "CompactBertFor",
        "CompactBertPreTrained",
        "CompactBertModel",
    ):
        assert forbidden not in modeling, forbidden
    classes = [node.name for node in ast.parse(modeling).body if isinstance(node, ast.ClassDef)]
    prefix = {
        "ib_bert": "IBBert",
        "compact_mobilebert": "CompactMobileBert",
        "minimoe": "MiniMoE",
        "moe_bert": "MoEBert",
    }
    assert classes and all(name.startswith(prefix[model_type]) for name in classes), classes
    assert len(modeling.splitlines()) < 1100


def _top_level_names(files: dict[str, str]) -> set[str]:
    names = set()
    for text in files.values():
        for node in ast.parse(text).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def test_each_family_ships_only_the_definitions_it_uses():
    def shipped(model_type):
        return _top_level_names(family_files(model_type))

    for model_type in ("ib_bert", "compact_mobilebert"):
        names = shipped(model_type)
        assert not {"load_balancing_loss", "hash_routing_table", "ROUTER_TYPES", "SparseBertConfigBase"} & names
        assert not {"MiniMoEConfig", "MoEBertConfig"} & names
    assert "IBBertConfig" not in shipped("compact_mobilebert") and "CompactMobileBertConfig" not in shipped("ib_bert")
    minimoe = shipped("minimoe")
    assert {
        "MiniMoERouter",
        "MiniMoEExperts",
        "MiniMoESparseFeedForward",
        "load_balancing_loss",
        "MiniMoEConfig",
    } <= minimoe
    assert not {"MoEBertConfig", "BottleneckBertConfig", "PRESET_FIELDS", "_student"} & minimoe


@pytest.mark.parametrize("model_type", ["ib_bert", "compact_mobilebert", "minimoe", "moe_bert"])
def test_a_configuration_file_defines_one_config_class_in_at_most_200_lines(model_type):
    """As transformers' generated files do: the shared parent class (``SparseBertConfigBase``, ``BottleneckBertConfig``)
    is flattened into the family's class, whose defaults and docstring it takes."""
    configuration = family_files(model_type)[f"configuration_{model_type}.py"]
    classes = [node for node in ast.parse(configuration).body if isinstance(node, ast.ClassDef)]
    assert [(node.name, [ast.unparse(base) for base in node.bases]) for node in classes] == [
        (
            type(tiny_configs()["mobilebert" if model_type == "compact_mobilebert" else model_type]).__name__,
            ["PretrainedConfig"],
        )
    ]
    assert "SparseBertConfigBase" not in configuration and "BottleneckBertConfig" not in configuration
    assert len(configuration.splitlines()) <= 200


# A package of its own, to check the rules on sources that the real package does not (yet) exercise.
FAKE_CONFIGURATION = """
from __future__ import annotations

from transformers import PretrainedConfig


class FakeBertConfig(PretrainedConfig):
    model_type = "fake_bert"
    auto_model_suffixes = {"AutoModel": "Model"}

    def __init__(self, hidden_size: int = 4, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
"""
FAKE_MODELING = """
from __future__ import annotations

import torch
from transformers import PreTrainedModel

from .configuration_fake import FakeBertConfig
{extra_imports}

class FakeBertModel(PreTrainedModel):
    config_class = FakeBertConfig

    def __init__(self, config):
        super().__init__(config)
        self.dense = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self.post_init()

    def forward(self, hidden_states):
        return self.dense(hidden_states)
{extra_code}
"""


def _fake_model_class(tmp_path, monkeypatch, extra_imports="", extra_code="", extra_files=None):
    package = f"fake_bert_{tmp_path.name.replace('-', '_')}"
    files = {
        "__init__.py": "",
        "configuration_fake.py": FAKE_CONFIGURATION,
        "modeling_fake.py": FAKE_MODELING.format(extra_imports=extra_imports, extra_code=extra_code),
        **(extra_files or {}),
    }
    (tmp_path / package).mkdir()
    for name, text in files.items():
        (tmp_path / package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(f"{package}.modeling_fake").FakeBertModel


def test_the_bundle_keeps_comments_leaves_out_unused_code_and_runs(tmp_path, monkeypatch):
    layers = (
        "# Comment above.\ndef double(x):\n    # Comment inside.\n    return 2 * x\n\n\ndef unused():\n    return 0\n"
    )
    extra_code = "\n    def doubled(self, x):\n        return layers.double(x)\n"
    model_class = _fake_model_class(tmp_path, monkeypatch, "from . import layers\n", extra_code, {"layers.py": layers})
    files = bundle_remote_code(model_class)
    modeling = files["modeling_fake_bert.py"]
    assert "class FakeBertModel(PreTrainedModel):" in modeling
    assert "# Comment above.\ndef double(x):\n    # Comment inside.\n" in modeling and "return double(x)" in modeling
    assert "unused" not in modeling
    bundle = tmp_path / f"bundled_{tmp_path.name}"
    bundle.mkdir()
    (bundle / "__init__.py").write_text("")
    for name, text in files.items():
        (bundle / name).write_text(text)
    model_class = importlib.import_module(f"{bundle.name}.modeling_fake_bert").FakeBertModel
    assert "save_pretrained" not in model_class.__dict__ and model_class.__mro__[1].__name__ == "PreTrainedModel"
    model = model_class(model_class.config_class(hidden_size=3))
    assert model(torch.ones(1, 3)).shape == (1, 3) and model.doubled(3) == 6


FLATTENED_CONFIGURATION = """
from __future__ import annotations

from transformers import PretrainedConfig


class FakeBaseConfig(PretrainedConfig):
    \"\"\"Fields every fake family shares.

    Args:
        hidden_size: the width.
    \"\"\"

    auto_model_suffixes = {"AutoModel": "Model"}

    def __init__(self, hidden_size: int = 4, layers: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.layers = layers

    # The parent's own.
    def describe(self) -> str:
        return "base"


class FakeBertConfig(FakeBaseConfig):
    \"\"\"The fake family.\"\"\"

    model_type = "fake_bert"

    def __init__(self, hidden_size: int = 3, **kwargs):
        super().__init__(hidden_size=hidden_size, **kwargs){extra_init}

    # The family's own.
    def describe(self) -> str:
        return "child"
"""


def test_the_config_class_is_flattened_into_one_class_with_its_defaults_docstring_and_methods(tmp_path, monkeypatch):
    configuration = {"configuration_fake.py": FLATTENED_CONFIGURATION.replace("{extra_init}", "")}
    files = bundle_remote_code(_fake_model_class(tmp_path, monkeypatch, extra_files=configuration))
    text = files["configuration_fake_bert.py"]
    assert [node.name for node in ast.parse(text).body if isinstance(node, ast.ClassDef)] == ["FakeBertConfig"]
    assert "class FakeBertConfig(PretrainedConfig):" in text and "FakeBase" not in text
    assert '"""The fake family.\n\n    Args:\n        hidden_size: the width.\n    """' in text
    assert "hidden_size: int = 3, layers: int = 1" in text
    assert (
        '# The family\'s own.\n    def describe(self) -> str:\n        return "child"' in text and "base" not in text
    )
    bundle = tmp_path / f"flattened_{tmp_path.name}"
    bundle.mkdir()
    (bundle / "__init__.py").write_text("")
    for name, generated in files.items():
        (bundle / name).write_text(generated)
    model_class = importlib.import_module(f"{bundle.name}.modeling_fake_bert").FakeBertModel
    config = model_class.config_class(layers=2)
    assert (config.hidden_size, config.layers, config.describe()) == (3, 2, "child")
    assert model_class(config)(torch.ones(1, 3)).shape == (1, 3)


def test_a_subclass_init_that_does_more_than_forward_its_defaults_cannot_be_flattened(tmp_path, monkeypatch):
    extra_init = "\n        self.layers = 2"
    configuration = {"configuration_fake.py": FLATTENED_CONFIGURATION.replace("{extra_init}", extra_init)}
    model_class = _fake_model_class(tmp_path, monkeypatch, extra_files=configuration)
    with pytest.raises(
        RemoteCodeError, match=r"configuration_fake\.py:\d+ \(FakeBertConfig\): the `__init__` at line"
    ):
        bundle_remote_code(model_class)


TWO_HELPERS = {
    "helpers_a.py": "def _helper():\n    return 1\n\n\ndef first():\n    return _helper()\n",
    "helpers_b.py": "def _helper():\n    return 2\n\n\ndef second():\n    return _helper()\n",
}


@pytest.mark.parametrize(
    ("extra_imports", "extra_code", "extra_files", "message"),
    [
        (
            "",
            "\n    def helper(self):\n        return undefined_helper()\n",
            {},
            r"modeling_fake\.py:22 .*`undefined_helper`",
        ),
        (
            "import safetensors",
            "\n    def helper(self):\n        return safetensors\n",
            {},
            r"modeling_fake\.py:10 \(FakeBertModel\) needs `import safetensors`; remote code may import only",
        ),
        (
            "from .helpers_a import first\nfrom .helpers_b import second",
            "\n    def helpers(self):\n        return first(), second()\n",
            TWO_HELPERS,
            r"`_helper` would be defined twice .*helpers_a\.py:1 .*helpers_b\.py:1|helpers_b\.py:1 .*helpers_a\.py:1",
        ),
    ],
    ids=["unresolvable-name", "unavailable-import", "name-collision"],
)
def test_sources_that_cannot_be_bundled_fail_naming_file_and_line(
    tmp_path, monkeypatch, extra_imports, extra_code, extra_files, message
):
    model_class = _fake_model_class(tmp_path, monkeypatch, extra_imports, extra_code, extra_files)
    with pytest.raises(RemoteCodeError, match=message):
        bundle_remote_code(model_class)


CACHE_HELPERS = "_CACHE = {}\n\n\ndef remember(key, value):\n    _CACHE[key] = value\n    return _CACHE\n"


def test_a_function_filling_a_module_level_cache_bundles_but_a_top_level_modification_fails(tmp_path, monkeypatch):
    """A ``def`` body runs after import (packed-weight caches do this); only import-time modifications are refused."""
    extra_code = "\n    def cached(self):\n        return remember('a', 1)\n"
    model_class = _fake_model_class(
        tmp_path, monkeypatch, "from .cache import remember\n", extra_code, {"cache.py": CACHE_HELPERS}
    )
    modeling = bundle_remote_code(model_class)["modeling_fake_bert.py"]
    assert "_CACHE = {}" in modeling and "_CACHE[key] = value" in modeling
    package = tmp_path / "modified_at_import"
    package.mkdir()
    model_class = _fake_model_class(
        package,
        monkeypatch,
        "from .cache import remember\n",
        extra_code,
        {"cache.py": CACHE_HELPERS + "\n\n_CACHE['b'] = 2\n"},
    )
    with pytest.raises(RemoteCodeError, match=r"cache\.py:9 .*modifies `_CACHE`"):
        bundle_remote_code(model_class)


def test_generating_needs_the_sources_only_not_the_package(tmp_path):
    """The package's ``__init__`` modules import the generated files, which are stale (or do not import at all)
    while a source changes: the generator imports the sources without them, and never imports ``compact_bert``."""
    script = BLOCK_COMPACT_BERT + textwrap.dedent(
        """
        from utils.hub_code import stale_files

        assert stale_files() == [], stale_files()
        assert not [name for name in sys.modules if name == "compact_bert" or name.startswith("compact_bert.")]
        print("generated from the sources alone")
        """
    )
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "generated from the sources alone" in result.stdout
