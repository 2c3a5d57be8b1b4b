"""Find, with ``ast``, every top-level definition of the package that some entry classes need at run time.

The remote-code writer ships a family as two flat files, so it needs the exact set of definitions the
family uses, whatever the module layout: starting from the entry classes, each name a definition uses is
resolved to the top-level statement that binds it, following relative imports across the package, and the
search continues from there. What comes out is a set of ``Definition`` units with their dependencies (split
into those needed while the module is imported, which fix the emission order, and those needed only when
a function runs) and the external imports they need.

Rules this puts on the package, each checked with an error naming the file and line:
- a shipped name is bound once, by a top-level ``class``, ``def``, assignment or import;
- package names are imported under their own name (``from .x import A``, not ``A as B``), and never from
  ``compact_bert`` absolutely;
- no top-level statement modifies a shipped object after its definition (``X[k] = v``, ``X.f(...)``).
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

__all__ = ["Definition", "ExternalImport", "RemoteCodeError", "SourceIndex"]


class RemoteCodeError(ValueError):
    """The package source cannot be bundled as written; the message names the file and line to change."""


@dataclass(frozen=True, order=True)
class ExternalImport:
    """One imported name, normalized so that ``import a.b as c`` and ``from a import b as c`` compare equal."""

    module: str | None  # None for ``import name`` (binding the first component of ``name``)
    name: str
    bound_as: str

    @property
    def root(self) -> str:
        return (self.module or self.name).split(".")[0]

    def statement(self) -> str:
        if self.module is None:
            alias = "" if self.bound_as == self.name.split(".")[0] else f" as {self.bound_as}"
            return f"import {self.name}{alias}"
        alias = "" if self.name == self.bound_as else f" as {self.bound_as}"
        return f"from {self.module} import {self.name}{alias}"


@dataclass(eq=False)
class Definition:
    """One top-level statement to ship, with what it needs."""

    module: str
    index: int  # position among the module's top-level statements, the tie-breaker of the emission order
    node: ast.stmt
    names: tuple[str, ...]
    import_time_needs: list[Definition] = field(default_factory=list)
    run_time_needs: list[Definition] = field(default_factory=list)
    external_imports: set[ExternalImport] = field(default_factory=set)
    # ``submodule.name`` spans (line, start, end, name) to write as ``name``: the flat file has no submodules.
    submodule_attributes: list[tuple[int, int, int, str]] = field(default_factory=list)
    # The text to ship when it is not the statement's own: a class with its package base classes flattened into it
    # (``flattening``), whose modules are ``inlined_modules``.
    text: str | None = None
    inlined_modules: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.module, self.index)


@dataclass(frozen=True)
class _Reference:
    name: str
    attribute: str | None  # ``name.attribute``: followed when ``name`` is a package module
    line: int
    import_time: bool
    # Read only by an annotation that Python never evaluates (``from __future__ import annotations``):
    # its external import is kept so that the annotation stays readable, but no definition is shipped for it.
    annotation: bool = False
    # For ``name.attribute`` on one line: its columns (UTF-8 offsets, as ``ast`` gives them), and whether
    # ``attribute`` is also a local name there (then ``name.attribute`` cannot become plain ``attribute``).
    span: tuple[int, int] | None = None
    attribute_is_local: bool = False


@dataclass
class _Module:
    name: str
    path: Path
    text: str
    tree: ast.Module
    is_package: bool
    bindings: dict[str, list[int]]  # name → indices of the top-level statements binding it
    modified: dict[str, int]  # name → line of a top-level statement that modifies the bound object
    evaluates_annotations: bool


def _location(module: _Module, line: int) -> str:
    return f"{module.path}:{line} ({module.name})"


class SourceIndex:
    """Parsed modules of one package, and the closure of definitions reachable from entry classes."""

    def __init__(self, package: str):
        top = sys.modules[package]
        self.package = package
        self.root = Path(top.__file__).parent if top.__file__ else Path(next(iter(top.__path__)))
        self._modules: dict[str, _Module] = {}
        self.definitions: dict[tuple[str, int], Definition] = {}

    # -- modules ---------------------------------------------------------------------------------------

    def module(self, name: str) -> _Module:
        if name not in self._modules:
            self._modules[name] = self._parse(name)
        return self._modules[name]

    def _module_path(self, name: str) -> tuple[Path, bool] | None:
        relative = Path(*name.split(".")[1:]) if "." in name else Path()
        if (self.root / relative / "__init__.py").is_file():
            return self.root / relative / "__init__.py", True
        if name != self.package and (self.root / relative).with_suffix(".py").is_file():
            return (self.root / relative).with_suffix(".py"), False
        return None

    def _parse(self, name: str) -> _Module:
        path, is_package = self._module_path(name)
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        bindings: dict[str, list[int]] = {}
        modified: dict[str, int] = {}
        future_annotations = False
        for index, statement in enumerate(tree.body):
            if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                future_annotations |= any(alias.name == "annotations" for alias in statement.names)
                continue
            if _is_type_checking_block(statement):
                continue
            for bound in _bound_names(statement):
                bindings.setdefault(bound, []).append(index)
            for target in _modified_names(statement):
                modified.setdefault(target, statement.lineno)
        return _Module(name, path, text, tree, is_package, bindings, modified, not future_annotations)

    # -- closure ---------------------------------------------------------------------------------------

    def collect(self, entries: list[type]) -> list[Definition]:
        """The entry classes' definitions plus everything they need, transitively (entries first)."""
        roots = []
        for entry in entries:
            if "." in entry.__qualname__ or not entry.__module__.startswith(self.package + "."):
                raise RemoteCodeError(f"{entry.__qualname__} must be a top-level class of the {self.package} package.")
            roots.append(self._definition_of(self.module(entry.__module__), entry.__name__))
        pending = list(roots)
        analysed: set[tuple[str, int]] = set()
        while pending:
            definition = pending.pop(0)
            if definition.key in analysed:
                continue
            analysed.add(definition.key)
            self._analyse(definition)
            pending.extend(definition.import_time_needs + definition.run_time_needs)
        return roots

    def _definition_of(self, module: _Module, name: str) -> Definition:
        indices = module.bindings.get(name, [])
        if len(indices) > 1:
            lines = [module.tree.body[index].lineno for index in indices]
            raise RemoteCodeError(
                f"{_location(module, lines[0])}: `{name}` is bound {len(indices)} times at the top level (lines "
                f"{', '.join(map(str, lines))}); remote code ships one top-level definition per name."
            )
        index = indices[0]
        key = (module.name, index)
        if key not in self.definitions:
            statement = module.tree.body[index]
            if name in module.modified:
                raise RemoteCodeError(
                    f"{_location(module, module.modified[name])}: this top-level statement modifies `{name}`, which "
                    "remote code ships; build it completely in its definition instead."
                )
            if not isinstance(
                statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign, ast.AnnAssign)
            ):
                raise RemoteCodeError(
                    f"{_location(module, statement.lineno)}: `{name}` is bound by a top-level "
                    f"{type(statement).__name__} statement; remote code ships only classes, functions and assignments."
                )
            self.definitions[key] = Definition(module.name, index, statement, tuple(_bound_names(statement)))
        return self.definitions[key]

    def _analyse(self, definition: Definition) -> None:
        module = self.module(definition.module)
        node = definition.node
        collector = _ReferenceCollector(module.evaluates_annotations)
        if isinstance(node, ast.ClassDef):
            collector.scan_class(node)
        else:
            collector.scan_top_level(node)
        for reference in collector.references:
            if reference.annotation:
                self._add_annotation_import(module, definition, reference)
                continue
            target = self._resolve(module, reference)
            if reference.attribute is not None and self._imported_submodule(module, reference.name) is not None:
                self._flatten_submodule_attribute(module, definition, reference)
            if isinstance(target, Definition):
                needs = definition.import_time_needs if reference.import_time else definition.run_time_needs
                if target is not definition and target not in needs:
                    needs.append(target)
            elif isinstance(target, ExternalImport):
                definition.external_imports.add(target)
        for nested in ast.walk(node):
            if isinstance(nested, (ast.Import, ast.ImportFrom)) and nested is not node:
                self._check_nested_import(module, nested)

    def _imported_submodule(self, module: _Module, name: str) -> str | None:
        """The package module that ``name`` is bound to by ``from . import name``, if it is one."""
        indices = module.bindings.get(name, [])
        statement = module.tree.body[indices[0]] if len(indices) == 1 else None
        if not isinstance(statement, ast.ImportFrom) or statement.level == 0:
            return None
        anchor = module.name if module.is_package else module.name.rpartition(".")[0]
        source = importlib.util.resolve_name("." * statement.level + (statement.module or ""), anchor)
        submodule = f"{source}.{name}"
        if self._module_path(source) is None or self._module_path(submodule) is None:
            return None
        return None if name in self.module(source).bindings else submodule

    def _flatten_submodule_attribute(self, module: _Module, definition: Definition, reference: _Reference) -> None:
        if reference.span is None or reference.attribute_is_local:
            raise RemoteCodeError(
                f"{_location(module, reference.line)}: `{reference.name}.{reference.attribute}` cannot be written as "
                f"plain `{reference.attribute}` in one flat file (split over lines, or `{reference.attribute}` is also "
                f"a local name); import it with `from .{reference.name} import {reference.attribute}`."
            )
        definition.submodule_attributes.append((reference.line, *reference.span, reference.attribute))

    def _add_annotation_import(self, module: _Module, definition: Definition, reference: _Reference) -> None:
        try:
            target = self._resolve(module, reference)
        except RemoteCodeError:
            return  # an annotation naming something remote code cannot ship stays an unevaluated string
        if isinstance(target, ExternalImport) and is_available_to_hub_users(target.root):
            definition.external_imports.add(target)

    def _resolve(self, module: _Module, reference: _Reference):
        """A ``Definition``, an ``ExternalImport`` or None (builtins); raises for anything unshippable."""
        name = reference.name
        if name not in module.bindings:
            if hasattr(builtins, name) or (name.startswith("__") and name.endswith("__")):
                return None
            raise RemoteCodeError(
                f"{_location(module, reference.line)}: `{name}` does not resolve to a top-level definition or import "
                f"of {module.name}."
            )
        indices = module.bindings[name]
        statement = module.tree.body[indices[0]]
        if len(indices) > 1 or not isinstance(statement, (ast.Import, ast.ImportFrom)):
            return self._definition_of(module, name)
        alias = next(alias for alias in statement.names if (alias.asname or alias.name).split(".")[0] == name)
        if isinstance(statement, ast.Import):
            if alias.name.split(".")[0] == self.package:
                raise self._absolute_import_error(module, statement)
            parent, _, leaf = alias.name.rpartition(".")
            if alias.asname is None or not parent:
                return ExternalImport(None, alias.name, name)
            return ExternalImport(parent, leaf, name)  # ``import a.b as c`` is ``from a import b as c``
        if statement.level == 0:
            if statement.module.split(".")[0] == self.package:
                raise self._absolute_import_error(module, statement)
            return ExternalImport(statement.module, alias.name, name)
        return self._follow_relative_import(module, statement, alias, reference)

    def _follow_relative_import(self, module: _Module, statement: ast.ImportFrom, alias: ast.alias, reference):
        if alias.asname is not None and alias.asname != alias.name:
            raise RemoteCodeError(
                f"{_location(module, statement.lineno)}: `{alias.name} as {alias.asname}` renames a package name, "
                f"which one flat remote-code file cannot do; import `{alias.name}` under its own name."
            )
        anchor = module.name if module.is_package else module.name.rpartition(".")[0]
        source = importlib.util.resolve_name("." * statement.level + (statement.module or ""), anchor)
        if self._module_path(source) is None:
            raise RemoteCodeError(f"{_location(module, statement.lineno)}: {source} is not a module of the package.")
        submodule = self._imported_submodule(module, alias.name)
        if submodule is None:
            return self._resolve_in(self.module(source), replace(reference, name=alias.name, attribute=None), module)
        # ``from . import submodule``: what is shipped is the name read from it, ``submodule.name``.
        if reference.attribute is None:
            raise RemoteCodeError(
                f"{_location(module, reference.line)}: the module `{alias.name}` is used as an object; remote "
                "code can only ship the names read from it (`module.name`)."
            )
        inner = replace(reference, name=reference.attribute, attribute=None)
        return self._resolve_in(self.module(submodule), inner, module)

    def _resolve_in(self, target: _Module, reference: _Reference, importer: _Module):
        if reference.name not in target.bindings:
            raise RemoteCodeError(
                f"{_location(importer, reference.line)}: `{reference.name}` is not defined at the top level of "
                f"{target.name} ({target.path})."
            )
        return self._resolve(target, reference)

    def _absolute_import_error(self, module: _Module, statement: ast.stmt) -> RemoteCodeError:
        return RemoteCodeError(
            f"{_location(module, statement.lineno)}: absolute import of {self.package}; import package modules "
            "relatively (`from .module import Name`) so that remote code can be bundled."
        )

    def _check_nested_import(self, module: _Module, statement: ast.stmt) -> None:
        """Imports inside functions are shipped as written, so they must be of modules Hub users have."""
        modules = (
            [alias.name for alias in statement.names]
            if isinstance(statement, ast.Import)
            else [statement.module or ""]
        )
        if isinstance(statement, ast.ImportFrom) and statement.level > 0:
            modules = [self.package]
        for name in modules:
            if not is_available_to_hub_users(name):
                raise RemoteCodeError(
                    f"{_location(module, statement.lineno)}: an import of {name or 'a package module'} inside a "
                    "shipped definition; remote code may import only torch, transformers and the standard library "
                    "there (move package imports to the top level)."
                )


def is_available_to_hub_users(module: str) -> bool:
    """Whether a Hub user who only installed transformers (and torch) can import ``module``."""
    root = module.split(".")[0]
    return root in ("__future__", "torch", "transformers") or root in sys.stdlib_module_names


def _is_type_checking_block(statement: ast.stmt) -> bool:
    test = getattr(statement, "test", None)
    return isinstance(statement, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _bound_names(statement: ast.stmt) -> list[str]:
    """Names a top-level statement binds in the module namespace."""
    if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [statement.name]
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in statement.names]
    if isinstance(statement, ast.AnnAssign) and statement.value is None:
        return []
    return [
        node.id
        for node in _walk_module_scope(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    ]


def _modified_names(statement: ast.stmt) -> list[str]:
    """Names whose object a top-level statement changes: ``X[k] = v``, ``X.a = v``, ``X += v``, ``X.f(...)``.

    A ``def`` runs only its decorators, defaults and annotations at import; its body (a cache filled at run
    time) changes nothing while the module is imported, so it is not searched.
    """
    names = []
    parts = [statement]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts = [*statement.decorator_list, statement.args] + ([statement.returns] if statement.returns else [])
    for node in (node for part in parts for node in _walk_module_scope(part)):
        if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.append(_root_name(node))
        elif isinstance(node, ast.AugAssign):
            names.append(_root_name(node.target))
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
        ):
            names.append(_root_name(node.value.func.value))
    return [name for name in names if name is not None]


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, *_COMPREHENSIONS)


def _walk_module_scope(statement: ast.stmt):
    """``ast.walk`` that stays in the module's scope (does not enter function, class or lambda bodies)."""
    stack = [statement]
    while stack:
        node = stack.pop()
        yield node
        if node is not statement and isinstance(node, _NESTED_SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _local_names(body: list[ast.AST]) -> set[str]:
    """Names bound in one function scope (not in nested scopes), minus those declared global or nonlocal."""
    names, declared = set(), set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return names - declared


def _argument_names(arguments: ast.arguments) -> set[str]:
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs + [arguments.vararg, arguments.kwarg]
    return {argument.arg for argument in every if argument is not None}


class _ReferenceCollector:
    """Global names a top-level definition reads, each marked as needed at import time or only at run time.

    ``visible`` is what a name may be bound to locally at a point; ``enclosing`` what nested functions see
    (a class body's names are visible in the class body but not in its methods, as in Python).
    """

    def __init__(self, evaluates_annotations: bool):
        self.evaluates_annotations = evaluates_annotations
        self.references: list[_Reference] = []
        self._in_lazy_annotation = False

    def scan_class(self, node: ast.ClassDef) -> None:
        for expression in [*node.decorator_list, *node.bases, *node.keywords]:
            self._scan(expression, frozenset(), frozenset(), import_time=True)
        self._scan_class_body(node, frozenset(), import_time=True)

    def scan_top_level(self, node: ast.stmt) -> None:
        self._scan(node, frozenset(), frozenset(), import_time=True)

    def _scan_class_body(self, node: ast.ClassDef, enclosing: frozenset, import_time: bool) -> None:
        visible = enclosing | _local_names(node.body)
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign):
                # Class annotations are evaluated at class creation by ``typing.get_type_hints`` (transformers 5
                # does so for every model class), so what they name is needed then.
                for child in (statement.annotation, statement.value):
                    if child is not None:
                        self._scan(child, visible, enclosing, import_time)
            else:
                self._scan(statement, visible, enclosing, import_time)

    def _scan_annotation(self, node: ast.expr, visible: frozenset, enclosing: frozenset, import_time: bool) -> None:
        lazy, self._in_lazy_annotation = self._in_lazy_annotation, not self.evaluates_annotations
        self._scan(node, visible, enclosing, import_time)
        self._in_lazy_annotation = lazy

    def _scan_function(self, node, visible: frozenset, enclosing: frozenset, import_time: bool) -> None:
        arguments = node.args
        for default in [*arguments.defaults, *arguments.kw_defaults]:
            if default is not None:
                self._scan(default, visible, enclosing, import_time)
        if not isinstance(node, ast.Lambda):
            every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs + [arguments.vararg, arguments.kwarg]
            for annotation in [argument.annotation for argument in every if argument is not None] + [node.returns]:
                if annotation is not None:
                    self._scan_annotation(annotation, visible, enclosing, import_time)
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        inner = enclosing | _argument_names(arguments) | _local_names(body)
        for statement in body:
            self._scan(statement, inner, inner, import_time=False)

    def _scan(self, node: ast.AST, visible: frozenset, enclosing: frozenset, import_time: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                self._scan(decorator, visible, enclosing, import_time)
            self._scan_function(node, visible, enclosing, import_time)
        elif isinstance(node, ast.Lambda):
            self._scan_function(node, visible, enclosing, import_time)
        elif isinstance(node, ast.ClassDef):
            for expression in [*node.decorator_list, *node.bases, *node.keywords]:
                self._scan(expression, visible, enclosing, import_time)
            self._scan_class_body(node, enclosing, import_time)
        elif isinstance(node, _COMPREHENSIONS):
            self._scan(node.generators[0].iter, visible, enclosing, import_time)
            inner = enclosing | {
                target.id
                for generator in node.generators
                for target in ast.walk(generator.target)
                if isinstance(target, ast.Name)
            }
            rest = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for generator in node.generators:
                rest += [generator.target, *generator.ifs] + (
                    [generator.iter] if generator is not node.generators[0] else []
                )
            for child in rest:
                self._scan(child, inner, inner, import_time)
        elif isinstance(node, ast.AnnAssign):
            self._scan_annotation(node.annotation, visible, enclosing, import_time)
            for child in (node.target, node.value):
                if child is not None:
                    self._scan(child, visible, enclosing, import_time)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.value.id not in visible:
                span = (node.col_offset, node.end_col_offset) if node.end_lineno == node.lineno else None
                self.references.append(
                    _Reference(
                        node.value.id,
                        node.attr,
                        node.lineno,
                        import_time,
                        self._in_lazy_annotation,
                        span,
                        node.attr in visible,
                    )
                )
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in visible:
                self.references.append(_Reference(node.id, None, node.lineno, import_time, self._in_lazy_annotation))
        else:
            for child in ast.iter_child_nodes(node):
                self._scan(child, visible, enclosing, import_time)
