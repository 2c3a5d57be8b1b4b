"""Write a model family's source next to its weights as flat, self-contained Hub remote code.

transformers loads ``trust_remote_code`` models from modules that sit in one folder and import each other
only as ``from .module import Name``. Our sources live in two packages (``configuration`` and
``modeling``), so this copies the model's module with every module it reaches through relative imports,
rewrites those imports to same-folder form, and records the ``auto_map`` in ``config.json``. Anything
else a copied module imports must be a package every transformers user has (torch, transformers).

transformers (4.57) copies into its module cache only the modules that the loaded file imports itself
when the folder is local (it recurses only for Hub repositories), yet importing needs them all; so each
entry file also imports, by name, every module of its dependency closure.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

__all__ = ["collect_remote_code", "write_remote_code"]

_RELATIVE_IMPORT = re.compile(r"^(?P<indent>[ \t]*)from[ \t]+(?P<dots>\.+)(?P<module>[\w.]*)[ \t]+import[ \t]", re.M)
_FORBIDDEN_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+compact_bert\b", re.M)


def _resolve(source: Path, dots: str, module: str) -> Path:
    if not module:
        raise ValueError(f"{source}: `from {dots} import ...` cannot be flattened; import a module by name.")
    base = source.parent
    for _ in range(len(dots) - 1):
        base = base.parent
    return base.joinpath(*module.split(".")).with_suffix(".py")


_EXPORTED_NAME = re.compile(r"^__all__\s*=\s*\[\s*[\"'](\w+)[\"']", re.M)


def collect_remote_code(*entry_files: Path) -> dict[str, str]:
    """Map flat file name → rewritten source for the given modules and everything they import relatively."""
    entries = [Path(path).resolve() for path in entry_files]
    pending = list(entries)
    sources: dict[str, str] = {}
    origins: dict[str, Path] = {}
    dependencies: dict[str, set[str]] = {}
    while pending:
        path = pending.pop()
        name = path.name
        if name in origins:
            if origins[name] != path:
                raise ValueError(f"Two modules would share the remote-code file name {name}: {origins[name]}, {path}.")
            continue
        text = path.read_text(encoding="utf-8")
        if _FORBIDDEN_IMPORT.search(text):
            raise ValueError(f"{path} imports compact_bert; remote code may import only torch and transformers.")
        dependencies[name] = set()

        def flatten(match: re.Match, source: Path = path) -> str:
            target = _resolve(source, match["dots"], match["module"])
            if not target.is_file():
                raise ValueError(f"{source}: relative import {match.group(0).strip()} does not resolve to a file.")
            pending.append(target)
            dependencies[source.name].add(target.name)
            return f"{match['indent']}from .{target.stem} import "

        origins[name] = path
        sources[name] = _RELATIVE_IMPORT.sub(flatten, text)
    for entry in entries:
        sources[entry.name] += _closure_imports(entry.name, sources, dependencies)
    return sources


def _closure_imports(entry: str, sources: dict[str, str], dependencies: dict[str, set[str]]) -> str:
    closure, stack = set(), list(dependencies[entry])
    while stack:
        name = stack.pop()
        if name not in closure:
            closure.add(name)
            stack.extend(dependencies[name])
    indirect = sorted(closure - dependencies[entry] - {entry})
    if not indirect:
        return ""
    lines = [
        "",
        "# transformers copies only the modules this file imports itself when loading a local folder, so the",
        "# modules it depends on through others are named here too.",
    ]
    for name in indirect:
        exported = _EXPORTED_NAME.search(sources[name])
        if exported is None:
            raise ValueError(f"{name} needs an `__all__` whose first entry the remote-code entry file can import.")
        lines.append(f"from .{Path(name).stem} import {exported.group(1)} as _closure_{Path(name).stem}  # noqa: F401")
    return "\n".join(lines) + "\n"


def write_remote_code(model_class: type, save_directory) -> None:
    """Copy ``model_class``'s family code into ``save_directory`` and point ``config.json``'s auto_map at it.

    The family's modeling module must define ``AUTO_CLASSES``: Auto class name → model class.
    """
    save_directory = Path(save_directory)
    modeling_module = sys.modules[model_class.__module__]
    config_class = model_class.config_class
    sources = collect_remote_code(Path(inspect.getfile(model_class)), Path(inspect.getfile(config_class)))
    for name, text in sources.items():
        (save_directory / name).write_text(text, encoding="utf-8")
    modeling_name = Path(inspect.getfile(model_class)).stem
    config_name = Path(inspect.getfile(config_class)).stem
    auto_map = {"AutoConfig": f"{config_name}.{config_class.__name__}"}
    for auto_name, head_class in modeling_module.AUTO_CLASSES.items():
        auto_map[auto_name] = f"{modeling_name}.{head_class.__name__}"
    config_path = save_directory / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["auto_map"] = auto_map
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
