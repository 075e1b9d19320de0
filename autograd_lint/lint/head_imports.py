"""libcst's ``AddImportsVisitor`` (libcst 1.9) as a function of a module's top-level statements.

The visitor reads and changes only a module's head: its first statement (skipped when
a docstring or ``__strict__ = ...``) and the one-import lines right after it.  Yet a
transform with it walks every node of the module, and building it and the import
gatherer it runs costs about 18 ms each (libcst's matcher visitors inspect their class
on construction), more than a quick fix may take.  :func:`add_imports` computes the
same module by calling nothing but libcst's node constructors, its ``parse_statement``
and its relative-import helper: the same steps, in the same order, as the visitor's
``visit_Module`` (with the gatherer's ``leave_Module``), ``leave_ImportFrom`` and
``leave_Module``.  ``tests/fix/test_head_imports.py`` compares the two on real heads.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import libcst as cst
from libcst.helpers import get_absolute_module_from_package_for_import

from autograd_lint.rules.base import ImportRef


def add_imports(module: cst.Module, needed: Sequence[ImportRef], package: str | None) -> cst.Module:
    """``module`` after ``AddImportsVisitor`` with ``needed`` (``package``: the context's
    ``full_package_name``, for relative imports in the module)."""
    for ref in needed:
        if ref.module == "__future__" and (ref.obj is None or ref.asname is not None):
            raise ValueError(f"cannot add {ref}")  # the visitor refuses these too
    module_imports = {ref.module for ref in needed if ref.obj is None and ref.asname is None}
    module_mapping = {
        name: {ref.obj for ref in needed if ref.module == name and ref.obj is not None and ref.asname is None}
        for name in sorted({ref.module for ref in needed if ref.obj is not None and ref.asname is None})
    }
    module_aliases = {ref.module: ref.asname for ref in needed if ref.obj is None and ref.asname is not None}
    alias_mapping = {
        name: [(ref.obj, ref.asname) for ref in needed if ref.module == name and ref.obj is not None and ref.asname is not None]
        for name in sorted({ref.module for ref in needed if ref.obj is not None and ref.asname is not None})
    }

    # visit_Module: what the imports at the top already bring.
    start = 1 if _skip_first(module) else 0
    top = []
    for statement in module.body[start:]:
        if not _is_import_line(statement):
            break
        top.append(statement.body[0])
    found = _Gathered(package)
    for node in top:
        found.add(node)
    module_imports -= found.module_imports
    for name, alias in found.module_aliases.items():
        if name in module_aliases and module_aliases[name] == alias:
            del module_aliases[name]
    for name, aliases in found.alias_mapping.items():
        for pair in aliases:
            if name in alias_mapping and pair in alias_mapping[name]:
                alias_mapping[name].remove(pair)
                if not alias_mapping[name]:
                    del alias_mapping[name]
    for name, objects in found.object_mapping.items():
        if name not in module_mapping:
            continue
        if "*" in objects:
            del module_mapping[name]
        else:
            module_mapping[name] = module_mapping[name] - objects
            if not module_mapping[name]:
                del module_mapping[name]

    # leave_ImportFrom: names added to a `from` import at the top of the same module.
    body = list(module.body)
    for index, statement in enumerate(body[start : start + len(top)], start):
        node = statement.body[0]
        if not isinstance(node, cst.ImportFrom) or isinstance(node.names, cst.ImportStar):
            continue
        name = get_absolute_module_from_package_for_import(package, node)
        if name is None or (name not in module_mapping and name not in alias_mapping):
            continue
        objects = module_mapping.pop(name, [])
        aliases = alias_mapping.pop(name, [])
        names = [
            *(cst.ImportAlias(name=cst.Name(obj)) for obj in sorted(objects)),
            *(cst.ImportAlias(name=cst.Name(obj), asname=cst.AsName(name=cst.Name(alias))) for obj, alias in sorted(aliases)),
            *node.names,
        ]
        body[index] = statement.with_changes(body=[node.with_changes(names=names), *statement.body[1:]])

    # leave_Module: the rest as new statements after the top imports.
    if not module_imports and not module_mapping and not module_aliases and not alias_mapping:
        return module.with_changes(body=body)
    add_at = start + len(top)
    after = _with_empty_line(body[add_at:])
    pairs: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for name, aliases in alias_mapping.items():
        pairs[name].extend(aliases)
    for name, objects in module_mapping.items():
        pairs[name].extend((obj, None) for obj in objects)
    ordered = {name: sorted(found_pairs) for name, found_pairs in pairs.items()}
    config = module.config_for_parsing

    def from_import(name: str, names: list[tuple[str, str | None]]) -> cst.BaseStatement:
        listed = ", ".join(obj if alias is None else f"{obj} as {alias}" for obj, alias in names)
        return cst.parse_statement(f"from {name} import {listed}", config=config)

    return module.with_changes(
        body=(
            *body[:start],
            *(from_import(name, names) for name, names in ordered.items() if name == "__future__"),
            *body[start:add_at],
            *(cst.parse_statement(f"import {name}", config=config) for name in sorted(module_imports)),
            *(cst.parse_statement(f"import {name} as {alias}", config=config) for name, alias in module_aliases.items()),
            *(from_import(name, names) for name, names in ordered.items() if name != "__future__"),
            *after,
        )
    )


def _is_import_line(statement: cst.CSTNode) -> bool:
    """``m.SimpleStatementLine(body=[m.ImportFrom() | m.Import()])``: one import alone on its line."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))
    )


def _skip_first(module: cst.Module) -> bool:
    """Whether the first statement is ``__strict__ = ...`` or a docstring (a plain string alone)."""
    if not module.body or not isinstance(module.body[0], cst.SimpleStatementLine):
        return False
    small = module.body[0].body
    if len(small) != 1:
        return False
    node = small[0]
    if isinstance(node, cst.Assign):
        return (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and node.targets[0].target.value == "__strict__"
        )
    return isinstance(node, cst.Expr) and isinstance(node.value, cst.SimpleString)


def _with_empty_line(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``_insert_empty_line``: a blank line before the statement after the new imports,
    unless one is there already."""
    if not statements:
        return statements
    first = statements[0]
    if not first.leading_lines:
        return [first.with_changes(leading_lines=(cst.EmptyLine(),)), *statements[1:]]
    if first.leading_lines[0].comment is None:
        return statements
    return [first.with_changes(leading_lines=(cst.EmptyLine(), *first.leading_lines)), *statements[1:]]


class _Gathered:
    """``_GatherImportsMixin``'s record of the imports it is shown."""

    def __init__(self, package: str | None) -> None:
        self.package = package
        self.module_imports: set[str] = set()
        self.object_mapping: dict[str, set[str]] = {}
        self.module_aliases: dict[str, str] = {}
        self.alias_mapping: dict[str, list[tuple[str, str]]] = {}

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for name in node.names:
                alias = name.evaluated_alias
                if alias is not None:
                    self.module_aliases[name.evaluated_name] = alias
                else:
                    self.module_imports.add(name.evaluated_name)
            return
        module = get_absolute_module_from_package_for_import(self.package, node)
        if module is None:
            return
        if isinstance(node.names, cst.ImportStar):
            self.object_mapping[module] = set("*")
            return
        aliases = [(alias.evaluated_name, alias.evaluated_alias) for alias in node.names if alias.asname is not None]
        if aliases:
            self.alias_mapping.setdefault(module, []).extend(aliases)  # type: ignore[arg-type]
        objects = {alias.evaluated_name for alias in node.names if alias.asname is None}
        if objects:
            self.object_mapping.setdefault(module, set())
            if "*" in self.object_mapping[module]:
                self.object_mapping[module] = set("*")
                return
            self.object_mapping[module].update(objects)
