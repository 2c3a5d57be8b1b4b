"""The packages of compact-bert import each other in layers, never in a cycle: a reader can start at the bottom
(the generated models, configuration, modeling, training) and go up, and no package needs one above it to be imported first.

The graph is read from the source, function-level imports included, with ``ast`` (so an import hidden inside a
function to dodge a cycle still counts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import compact_bert

ROOT = Path(compact_bert.__file__).resolve().parent
PACKAGES = (
    "models",
    "configuration",
    "modeling",
    "optimization",
    "training",
    "embeddings",
    "export",
    "evaluation",
    "distillation",
    "finetuning",
    "model_cards",
    "jobs",
    "cli",
)


def package_imports() -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) → the ``file:line`` of each such import."""
    edges: dict[tuple[str, str], list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative.parts[0] == "models" and len(relative.parts) == 3:  # generated: torch and transformers only
                continue
            depth = len(relative.parts) - 1
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level > depth:
                    target = (node.module or "").split(".")[0]
                elif node.level == 0 and (node.module or "").startswith("compact_bert."):
                    target = node.module.split(".")[1]
                else:
                    continue
                if target in PACKAGES and target != package:
                    edges.setdefault((package, target), []).append(f"{relative}:{node.lineno}")
    return edges


def test_the_packages_import_each_other_without_cycles():
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("an installed compact-bert: the checkout's test covers the sources")
    edges = package_imports()
    graph = {package: sorted(target for source, target in edges if source == package) for package in PACKAGES}

    def path_back(start: str, goal: str, seen: set[str]) -> list[str] | None:
        for target in graph[start]:
            if target == goal:
                return [start, goal]
            if target not in seen:
                seen.add(target)
                rest = path_back(target, goal, seen)
                if rest:
                    return [start, *rest]
        return None

    cycles = []
    for (source, target), places in sorted(edges.items()):
        back = path_back(target, source, set())
        if back:
            cycles.append(f"{source} -> {' -> '.join(back)} (first: {places[0]})")
    assert cycles == [], "import cycles between packages:\n" + "\n".join(cycles)


def test_the_jobs_do_not_import_the_command_line():
    """A job is a library function: the commands call it, never the other way round."""
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("an installed compact-bert: the checkout's test covers the sources")
    assert ("jobs", "cli") not in package_imports()


def test_no_command_imports_another_command():
    """Only the dispatcher (``cli/main.py``) imports the command modules; a command calls jobs, not commands, so
    that no setting is parsed twice."""
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("an installed compact-bert: the checkout's test covers the sources")
    offending = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        if path.name == "main.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module or "", *(alias.name for alias in node.names)]
                if any(name.endswith("_command") for name in names):
                    offending.append(f"cli/{path.name}:{node.lineno}")
    assert offending == []


def test_a_commands_parser_is_called_by_that_command_only():
    """``parse_finetune_arguments`` (and any command's parser) is not a way for one job to call another."""
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("an installed compact-bert: the checkout's test covers the sources")
    sources = [*ROOT.glob("*.py"), *(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))]
    callers = [
        str(path.relative_to(ROOT))
        for path in sorted(sources)
        if "parse_finetune_arguments(" in path.read_text(encoding="utf-8")
    ]
    assert callers == ["cli/finetune_command.py"], callers
