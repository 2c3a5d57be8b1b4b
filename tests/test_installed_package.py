"""An installed compact-bert, editable or from the wheel, is what the wheel ships and nothing more.

The repository root is the package (docs/layout.md), so the checkout also holds folders that are not part of it:
tests/, benchmarks/, examples/, utils/, docs/. setuptools' default editable install (its "lenient" mode) maps
``compact_bert`` to the whole checkout, which made ``compact_bert.tests`` and the others importable after
``pip install -e .`` but not from the wheel. pyproject.toml asks for the strict mode instead
(``[tool.distutils.editable_wheel]``): the editable install is a tree of links to exactly the files the wheel carries.

compact-bert is imported in a subprocess, from an empty directory and without ``PYTHONPATH``, so that neither the
checkout nor pytest's ``pythonpath`` can stand in for the install. The checkout is read from this file's location,
which is also where CI's wheel environment runs the tests from (.ci/run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

REPOSITORY = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["tool"]["setuptools"]
# The packages the wheel ships: compact_bert's, and optimum.commands.register (the optimum-cli plug-in).
PACKAGES = SETUPTOOLS["packages"]
SHIPPED_FOLDERS = {name.split(".")[1] for name in PACKAGES if name.startswith("compact_bert.")}
# Every other folder of the checkout that Python could import as compact_bert.<name>.
DEVELOPMENT_FOLDERS = sorted(
    path.name
    for path in REPOSITORY.iterdir()
    if path.is_dir() and path.name.isidentifier() and path.name not in SHIPPED_FOLDERS
)
REINSTALL = 'reinstall compact-bert (`pip install -e ".[dev]"` in the checkout)'


def source_folder(package: str) -> Path:
    """The folder of the checkout that pyproject's package-dir makes ``package``."""
    for prefix, folder in SETUPTOOLS["package-dir"].items():
        if package == prefix or package.startswith(prefix + "."):
            return REPOSITORY.joinpath(folder, *package[len(prefix) :].split(".")[1:])
    raise AssertionError(f"{package} is not under any package-dir of pyproject.toml")


PROBE = """
import importlib, json, sys
packages, folders = json.loads(sys.argv[1]), json.loads(sys.argv[2])
import compact_bert
report = {"location": compact_bert.__file__, "importable": [], "failed": {}, "folders": {}}
for name in folders:
    try:
        importlib.import_module(f"compact_bert.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"compact_bert.{name}":  # the folder was found; something it imports was not
            report["importable"].append(name)
    else:
        report["importable"].append(name)
for name in packages:
    try:
        report["folders"][name] = list(importlib.import_module(name).__path__)
    except Exception as error:
        report["failed"][name] = f"{type(error).__name__}: {error}"
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """What the installed compact_bert exposes (one interpreter start for all the tests below)."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(PACKAGES), json.dumps(DEVELOPMENT_FOLDERS)],
        cwd=tmp_path_factory.mktemp("elsewhere"),
        env={**environment, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_the_development_folders_are_not_part_of_the_installed_package(installed):
    assert {"tests", "benchmarks", "examples", "utils"} <= set(DEVELOPMENT_FOLDERS)
    assert installed["importable"] == [], (
        f"compact_bert.{{{', '.join(installed['importable'])}}} can be imported from the install at "
        f"{installed['location']}, but the wheel does not ship them: an editable install made in setuptools' "
        f"lenient mode (before pyproject.toml asked for the strict one) maps compact_bert to the whole checkout; "
        f"{REINSTALL}"
    )


def test_every_listed_package_imports_from_the_install(installed):
    assert installed["failed"] == {}, f"{installed['failed']}; if a package was added since the install, {REINSTALL}"


def test_the_install_carries_every_file_the_checkout_would_ship(installed):
    """A strict editable install links the files that existed when it was made: a module or data file added since
    is missing until the install is made again (as it would be from a wheel built before it was added)."""
    missing = []
    for package in PACKAGES:
        source = source_folder(package)
        patterns = ["*.py", *SETUPTOOLS.get("package-data", {}).get(package, [])]
        expected = {path.name for pattern in patterns for path in source.glob(pattern) if path.is_file()}
        folders = [Path(folder) for folder in installed["folders"].get(package, [])]
        missing += [
            f"{package}: {name}" for name in sorted(expected) if not any((f / name).is_file() for f in folders)
        ]
    assert missing == [], f"not in the install at {installed['location']}: {missing}; {REINSTALL}"
