"""The wheel carries every subpackage: pyproject.toml lists packages explicitly (the repository root is the package),
so a new folder of code that is not listed would be missing from an installed compact-bert."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

import compact_bert

ROOT = Path(compact_bert.__file__).resolve().parent
NOT_PACKAGED = {"tests", ".ci", "build", "benchmarks", "docs", "examples", "utils", "compact_bert.egg-info"}


def test_every_folder_of_code_is_listed_as_a_package():
    pyproject = ROOT / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("an installed compact-bert: the wheel's own tests exercise what it carries")
    listed = set(tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["packages"])
    on_disk = set()
    for init in ROOT.rglob("__init__.py"):
        parts = init.parent.relative_to(ROOT).parts
        if parts and (parts[0] in NOT_PACKAGED or parts[0].startswith(".")):
            continue
        on_disk.add(".".join(("compact_bert", *parts)))
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def test_the_native_relation_kernel_source_ships_with_the_package():
    source = ROOT / "distillation" / "relation_kernels" / "relation_kl.c"
    assert source.is_file()
    pyproject = ROOT / "pyproject.toml"
    if pyproject.is_file():
        package_data = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]
        assert "*.c" in package_data["compact_bert.distillation.relation_kernels"]


def test_every_model_types_generated_code_is_listed_as_a_package():
    """The families are defined in ``models/<model_type>/*.py``, which saving copies: a folder missing from the list
    would make an installed compact-bert fail at import."""
    pyproject = ROOT / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("an installed compact-bert: the wheel's own tests save every family")
    listed = set(tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["packages"])
    folders = {
        f"compact_bert.models.{path.name}"
        for path in (ROOT / "models").iterdir()
        if path.is_dir() and path.name != "__pycache__"
    }
    assert folders and folders <= listed
