"""Flatten a config class and the package classes it inherits from into one class, as transformers' modular converter
does: a generated configuration file defines exactly one config class, the one its model type ships.

The sources keep what families share in a parent class (``SparseBertConfigBase``, ``BottleneckBertConfig``) and
each family's config is a short subclass: its ``model_type``, the defaults that differ and, where needed, a method.
Flattening writes the parent's own text under the subclass's name, with

- the subclass's docstring, followed by the parent's after its first paragraph (the ``Args:`` every family shares);
- the subclass's class attributes first, and its methods in place of the parent's of the same name (new ones last);
- the parent's ``__init__``, its defaults replaced by the subclass's. The subclass's ``__init__`` may only forward
  its arguments (``super().__init__(hidden_size=hidden_size, ..., **kwargs)``): anything else it did would be lost.

Text is spliced, not regenerated, so comments and formatting stay as written.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from .closure import Definition, RemoteCodeError

__all__ = ["flatten_class"]


def flatten_class(
    child: Definition, parent: Definition, child_text: str, parent_text: str, location: str
) -> Definition:
    """The definition of ``child`` with ``parent`` (its one base, a package class) flattened into it, needing what
    either needs (the caller drops ``parent`` itself); the texts are each one's source (``parent_text`` already
    flattened where ``parent`` has a package base of its own)."""
    text = _merged_text(_class_node(child_text), child_text, _class_node(parent_text), parent_text, location)
    return replace(
        child,
        import_time_needs=child.import_time_needs + parent.import_time_needs,
        run_time_needs=child.run_time_needs + parent.run_time_needs,
        external_imports=child.external_imports | parent.external_imports,
        text=text,
        inlined_modules=(*parent.inlined_modules, parent.module),
    )


def _class_node(text: str) -> ast.ClassDef:
    return next(node for node in ast.parse(text).body if isinstance(node, ast.ClassDef))


class _Splicer:
    """Replacements of spans of a text (``ast`` positions: line numbers and UTF-8 column offsets), applied at once."""

    def __init__(self, text: str):
        self.data = text.encode("utf-8")
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))
        self.edits: list[tuple[int, int, str]] = []

    def offset(self, line: int, column: int = 0) -> int:
        return self.line_starts[line - 1] + column

    def line_end(self, line: int) -> int:
        """The offset of the end of ``line``, before its newline."""
        start, end = self.line_starts[line - 1], self.line_starts[line]
        return start + len(self.data[start:end].rstrip(b"\r\n"))

    def replace(self, start: int, end: int, text: str) -> None:
        self.edits.append((start, end, text))

    def result(self) -> str:
        data = self.data
        for start, end, text in sorted(self.edits, reverse=True):
            data = data[:start] + text.encode("utf-8") + data[end:]
        return data.decode("utf-8")


def _segment(text: str, node: ast.AST, with_comments: bool = False) -> str:
    """The source of ``node`` (whole lines for a statement), with the comment lines directly above it."""
    lines = text.splitlines()
    first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])
    if with_comments:
        while first > 1 and lines[first - 2].lstrip().startswith("#"):
            first -= 1
    if isinstance(node, ast.stmt):
        return "\n".join(lines[first - 1 : node.end_lineno])
    return ast.get_source_segment(text, node)


def _statement_span(splicer: _Splicer, text: str, node: ast.stmt) -> tuple[int, int]:
    """Byte span of the whole lines of ``node`` and the comment lines directly above it, without the last newline."""
    lines = text.splitlines()
    first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return splicer.offset(first), splicer.line_end(node.end_lineno)


def _docstring(node: ast.ClassDef) -> ast.Expr | None:
    first = node.body[0] if node.body else None
    is_string = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return first if is_string and isinstance(first.value.value, str) else None


def _assigned_names(statement: ast.stmt) -> set[str]:
    targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
    return {target.id for target in targets if isinstance(target, ast.Name)}


def _merged_text(child: ast.ClassDef, child_text: str, parent: ast.ClassDef, parent_text: str, location: str) -> str:
    if [ast.unparse(base) for base in child.bases] != [parent.name] or child.keywords or child.decorator_list:
        raise RemoteCodeError(f"{location}: {child.name} can be flattened only with one base class and no decorators.")
    splicer = _Splicer(parent_text)
    # The header and the comments above it: the child's.
    above_child = "".join(line + "\n" for line in child_text.splitlines()[: child.lineno - 1])
    splicer.replace(0, splicer.offset(parent.lineno) + len(f"class {parent.name}"), f"{above_child}class {child.name}")
    _merge_docstrings(splicer, child, child_text, parent, parent_text)
    parent_members = {
        name: statement
        for statement in parent.body
        for name in ({statement.name} if isinstance(statement, ast.FunctionDef) else _assigned_names(statement))
    }
    new_attributes, new_methods = [], []
    for statement in child.body[1 if _docstring(child) else 0 :]:
        names = {statement.name} if isinstance(statement, ast.FunctionDef) else _assigned_names(statement)
        if names == {"__init__"}:
            _merge_init_defaults(splicer, statement, child_text, parent_members.get("__init__"), location)
        elif len(names) == 1 and next(iter(names)) in parent_members:
            span = _statement_span(splicer, parent_text, parent_members[next(iter(names))])
            splicer.replace(*span, _segment(child_text, statement, with_comments=True))
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and names:
            new_attributes.append(_segment(child_text, statement, with_comments=True))
        elif isinstance(statement, ast.FunctionDef):
            new_methods.append(_segment(child_text, statement, with_comments=True))
        else:
            raise RemoteCodeError(f"{location}: line {statement.lineno} of {child.name} cannot be flattened.")
    if new_attributes:  # first in the class body, after the docstring
        body = parent.body[1:] if _docstring(parent) else parent.body
        at = _statement_span(splicer, parent_text, body[0])[0] if body else splicer.line_end(parent.end_lineno)
        splicer.replace(at, at, "\n".join(new_attributes) + "\n" if body else "\n\n" + "\n".join(new_attributes))
    if new_methods:
        end = splicer.line_end(parent.end_lineno)
        splicer.replace(end, end, "".join("\n\n" + method for method in new_methods))
    return splicer.result()


def _merge_docstrings(splicer, child: ast.ClassDef, child_text: str, parent: ast.ClassDef, parent_text: str) -> None:
    """The child's docstring, then the parent's after its first paragraph (the parent's if the child has none)."""
    child_doc, parent_doc = _docstring(child), _docstring(parent)
    if child_doc is None:
        return
    merged = ast.get_source_segment(child_text, child_doc.value)
    if parent_doc is None:
        at = _statement_span(splicer, parent_text, parent.body[0])[0]
        splicer.replace(at, at, f"    {merged}\n\n")
        return
    parent_raw = ast.get_source_segment(parent_text, parent_doc.value)
    if "\n\n" in parent_raw:
        merged = merged.removesuffix('"""').rstrip() + parent_raw[parent_raw.index("\n\n") :]
    node = parent_doc.value
    start, end = splicer.offset(node.lineno, node.col_offset), splicer.offset(node.end_lineno, node.end_col_offset)
    splicer.replace(start, end, merged)


def _merge_init_defaults(splicer, init: ast.FunctionDef, child_text: str, parent_init, location: str) -> None:
    """Give the parent's ``__init__`` the child's defaults; the child's may only forward its arguments."""
    arguments = init.args
    named = [argument.arg for argument in arguments.args[1:] + arguments.kwonlyargs]
    statements = [statement for statement in init.body if not (statement is init.body[0] and _is_string(statement))]
    call = statements[0].value if len(statements) == 1 and isinstance(statements[0], ast.Expr) else None
    forwarded = {(name, name) for name in named} | ({(None, arguments.kwarg.arg)} if arguments.kwarg else set())
    forwards = (
        isinstance(call, ast.Call)
        and ast.unparse(call.func) == "super().__init__"
        and not call.args
        and {(keyword.arg, ast.unparse(keyword.value)) for keyword in call.keywords} == forwarded
    )
    if not forwards or parent_init is None or arguments.vararg or arguments.posonlyargs:
        raise RemoteCodeError(
            f"{location}: the `__init__` at line {init.lineno} may only pass its arguments to `super().__init__` "
            "(`name=name, ..., **kwargs`) to be flattened; put what else it does in the parent class."
        )
    defaults = dict(zip(reversed(arguments.args), reversed(arguments.defaults), strict=False))
    defaults |= {
        argument: default for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    }
    parent_arguments = parent_init.args
    parent_defaults = dict(zip(reversed(parent_arguments.args), reversed(parent_arguments.defaults), strict=False))
    parent_defaults |= dict(zip(parent_arguments.kwonlyargs, parent_arguments.kw_defaults, strict=True))
    parent_defaults = {argument.arg: default for argument, default in parent_defaults.items()}
    for argument, default in defaults.items():
        if default is None:
            continue
        target = parent_defaults.get(argument.arg)
        if target is None:
            raise RemoteCodeError(
                f"{location}: `{argument.arg}` (line {argument.lineno}) is no argument with a default of the parent's "
                "`__init__`; only defaults can differ in a flattened subclass."
            )
        start = splicer.offset(target.lineno, target.col_offset)
        splicer.replace(
            start,
            splicer.offset(target.end_lineno, target.end_col_offset),
            ast.get_source_segment(child_text, default),
        )


def _is_string(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )
