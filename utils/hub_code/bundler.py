"""Generate, at development time, the two files of Hub remote code of a model family.

The Hub convention, which transformers' dynamic-module loader follows on both release lines, is one
``configuration_<model_type>.py`` and one ``modeling_<model_type>.py`` per folder, importing only torch,
transformers and the standard library. Our sources are spread over two packages and shared building
blocks, so the two files are assembled from them: ``closure`` finds, with ``ast``, every
top-level definition the family's config and Auto classes use, and this module emits the config's closure
into the configuration file and the rest into the modeling file, each in dependency order, with the
definitions' own text (docstrings and comments included). Nothing the family does not use is shipped, and
the module layout of the package does not matter.

The output is committed under ``modeling/remote_code/<model_type>/``: it is the one file a reader opens to see a
family whole, and what ``save_pretrained`` copies next to the weights. Saving therefore parses no code; a test
and CI check that the committed files equal what this module generates from the sources.
"""

from __future__ import annotations

import ast
import heapq
import io
import sys
import textwrap
import tokenize

from compact_bert.modeling.hub_saving import GENERATED_HEADER

from .closure import Definition, ExternalImport, RemoteCodeError, SourceIndex, is_available_to_hub_users

__all__ = ["GENERATED_HEADER", "RemoteCodeError", "bundle_remote_code"]


def bundle_remote_code(model_class: type) -> dict[str, str]:
    """File name → text of ``configuration_<model_type>.py`` and ``modeling_<model_type>.py`` for the family
    of ``model_class`` (its module's ``AUTO_CLASSES`` and ``model_class.config_class``)."""
    config_class = model_class.config_class
    model_type = config_class.model_type
    index = SourceIndex(model_class.__module__.split(".")[0])
    config_roots = index.collect([config_class])
    model_roots = index.collect(_entry_classes(model_class))
    config_side = _closure(config_roots)
    config_keys = {definition.key for definition in config_side}
    model_side = [definition for definition in _closure(model_roots) if definition.key not in config_keys]
    configuration_name, modeling_name = _module_names(model_type)
    # The config class always, so that the modeling file names the configuration file it belongs with.
    from_configuration = sorted(
        {need.names[0] for definition in model_side for need in _needs(definition) if need.key in config_keys}
        | {config_class.__name__}
    )
    return {
        f"{configuration_name}.py": _render(index, config_side, config_roots, "configuration", model_type, {}),
        f"{modeling_name}.py": _render(
            index, model_side, model_roots, "modeling", model_type, {configuration_name: from_configuration}
        ),
    }


def _module_names(model_type: str) -> tuple[str, str]:
    return f"configuration_{model_type}", f"modeling_{model_type}"


def _entry_classes(model_class: type) -> list[type]:
    auto_classes = getattr(sys.modules[model_class.__module__], "AUTO_CLASSES", None)
    if not isinstance(auto_classes, dict):
        raise RemoteCodeError(
            f"{model_class.__module__} must define AUTO_CLASSES (Auto class name → model class) to ship remote code."
        )
    entries = list(dict.fromkeys(auto_classes.values()))
    return entries if model_class in entries else [*entries, model_class]


def _needs(definition: Definition) -> list[Definition]:
    return definition.import_time_needs + definition.run_time_needs


def _closure(roots: list[Definition]) -> list[Definition]:
    seen: dict[tuple[str, int], Definition] = {}
    pending = list(roots)
    while pending:
        definition = pending.pop()
        if definition.key not in seen:
            seen[definition.key] = definition
            pending.extend(_needs(definition))
    return list(seen.values())


def _emission_order(definitions: list[Definition], roots: list[Definition]) -> list[Definition]:
    """Every definition after what it needs at import time; otherwise modules in dependency order (building
    blocks first) and each module's definitions in source order."""
    in_file = {definition.key: definition for definition in definitions}
    module_rank = {module: rank for rank, module in enumerate(_module_order(definitions, roots))}
    waiting = {
        key: {need.key for need in definition.import_time_needs if need.key in in_file}
        for key, definition in in_file.items()
    }
    ready = [(module_rank[key[0]], key[1], key) for key, needs in waiting.items() if not needs]
    heapq.heapify(ready)
    order = []
    while ready:
        key = heapq.heappop(ready)[2]
        order.append(in_file[key])
        for other, needs in waiting.items():
            if key in needs:
                needs.discard(key)
                if not needs:
                    heapq.heappush(ready, (module_rank[other[0]], other[1], other))
    if len(order) < len(in_file):
        stuck = sorted(name for key in in_file.keys() - {d.key for d in order} for name in in_file[key].names)
        raise RemoteCodeError(f"These definitions need each other at import time and cannot be ordered: {stuck}.")
    return order


def _module_order(definitions: list[Definition], roots: list[Definition]) -> list[str]:
    modules: dict[str, list[str]] = {}
    modules_in_file = {definition.module for definition in definitions}
    for definition in sorted(definitions, key=lambda definition: definition.key):
        depends = modules.setdefault(definition.module, [])
        for need in _needs(definition):
            if need.module != definition.module and need.module not in depends and need.module in modules_in_file:
                depends.append(need.module)
    order: list[str] = []
    started: set[str] = set()

    def visit(module: str) -> None:
        if module in started or module not in modules:
            return
        started.add(module)
        for dependency in modules[module]:
            visit(dependency)
        order.append(module)

    for module in [root.module for root in roots] + sorted(modules):
        visit(module)
    return order


def _render(index, definitions, roots, kind: str, model_type: str, relative_imports: dict[str, list[str]]) -> str:
    order = _emission_order(definitions, roots)
    external_imports = _external_imports(index, order)
    _check_name_collisions(index, order, external_imports, relative_imports)
    sources = ", ".join(dict.fromkeys(definition.module for definition in order))
    lines = [
        f"{GENERATED_HEADER}; do not edit by hand.",
        "",
        f"The {kind} code of the ``{model_type}`` model type as Hub remote code, importing only torch,",
        "transformers and the standard library. Generated from these modules, where any change belongs (then",
        "run `python -m utils.hub_code` in the repository):",
        *textwrap.wrap(sources, width=100, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False),
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    for group in (True, False):
        statements = [external.statement() for external in external_imports if _is_standard_library(external) == group]
        lines += statements + ([""] if statements else [])
    for module, names in relative_imports.items():
        lines += [f"from .{module} import {name}" for name in names] + [""]
    exported = sorted(name for root in roots for name in root.names)
    lines += ["__all__ = [", *(f'    "{name}",' for name in exported), "]"]
    for definition in order:
        lines += ["", "", _definition_text(index.module(definition.module), definition)]
    text = "\n".join(lines) + "\n"
    ast.parse(text)  # a bundling mistake fails here, when saving, rather than when a user loads the folder
    return text


def _external_imports(index, order: list[Definition]) -> list[ExternalImport]:
    imports = set()
    for definition in order:
        for external in definition.external_imports:
            if not is_available_to_hub_users(external.root):
                module = index.module(definition.module)
                raise RemoteCodeError(
                    f"{module.path}:{definition.node.lineno} ({definition.names[0]}) needs `{external.statement()}`; "
                    "remote code may import only torch, transformers and the standard library."
                )
            imports.add(external)
    return sorted(
        imports,
        key=lambda external: (
            not _is_standard_library(external),
            external.module is not None,
            external.module or "",
            external.name,
        ),
    )


def _is_standard_library(external: ExternalImport) -> bool:
    return external.root in sys.stdlib_module_names or external.root == "__future__"


def _check_name_collisions(index, order, external_imports, relative_imports) -> None:
    """One flat file has one namespace: two things bound to one name would silently replace each other."""
    owners: dict[str, str] = {}

    def claim(name: str, owner: str) -> None:
        if name in owners and owners[name] != owner:
            raise RemoteCodeError(
                f"`{name}` would be defined twice in one remote-code file: by {owners[name]} and by {owner}; "
                "rename one."
            )
        owners[name] = owner

    for external in external_imports:
        plain_import = external.module is None and external.bound_as == external.root
        claim(external.bound_as, f"`import {external.root}`" if plain_import else f"`{external.statement()}`")
    for module, names in relative_imports.items():
        for name in names:
            claim(name, f"`from .{module} import {name}`")
    for definition in order:
        module = index.module(definition.module)
        for name in definition.names:
            claim(name, f"{module.path}:{definition.node.lineno}")


def _definition_text(module, definition: Definition) -> str:
    """The statement's own source lines, with the comment lines directly above it."""
    lines = module.text.splitlines()
    for line, start, end, name in sorted(definition.submodule_attributes, reverse=True):
        encoded = lines[line - 1].encode("utf-8")
        lines[line - 1] = (encoded[:start] + name.encode("utf-8") + encoded[end:]).decode("utf-8")
    node = definition.node
    first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])
    while first > 1 and lines[first - 2].startswith("#"):
        first -= 1
    if not definition.dropped_bases:
        return "\n".join(lines[first - 1 : node.end_lineno])
    return "\n".join(
        lines[first - 1 : node.lineno - 1] + _header_without_dropped_bases(module.text, lines, definition)
    )


def _header_without_dropped_bases(text: str, lines: list[str], definition: Definition) -> list[str]:
    node = definition.node
    kept = [ast.get_source_segment(text, base) for base in node.bases if base not in definition.dropped_bases]
    kept += [ast.get_source_segment(text, keyword) for keyword in node.keywords]
    header = f"class {node.name}({', '.join(kept)}):" if kept else f"class {node.name}:"
    class_lines = lines[node.lineno - 1 : node.end_lineno]
    depth = 0
    for token in tokenize.generate_tokens(io.StringIO("\n".join(class_lines) + "\n").readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.OP and token.string == ":" and depth == 0:
            row, column = token.end
            return [header + class_lines[row - 1][column:], *class_lines[row:]]
    raise RemoteCodeError(f"Could not find the end of the header of class {node.name}.")
