"""Which :mod:`ast` nodes of a module or function bind names in that scope, and how many
times a module binds each name (at module level, or anywhere).

One walk for every reader that asks "what does this scope bind" from the text
(:mod:`.helpers` for the module's own functions, :mod:`.trainable` for a caller's
locals): a scope's names are bound by its own statements and expressions, not by the
bodies of the functions, classes and lambdas nested in it (their ``def``/``class``
statement binds their name; their decorators, defaults and base classes run in the
enclosing scope).
"""

from __future__ import annotations

import ast
from typing import Iterator, Mapping

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes below ``scope`` (a module, or a function with its parameters) that run in
    it: nested ``def``/``class``/``lambda`` nodes are yielded with their decorators,
    defaults and bases, not their bodies.  Comprehensions are walked: a ``:=`` in one binds
    in ``scope``; their own loop targets are yielded too, which callers that count
    bindings take as bindings (an over-count only makes them more cautious)."""
    stack: list[ast.AST] = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _NESTED):
            stack.extend(_runs_outside(node))
            continue
        stack.extend(ast.iter_child_nodes(node))


def module_bindings(tree: ast.Module) -> Mapping[str, int] | None:
    """How many times the module binds each name at module level (``def``, ``class``,
    imports, assignment targets; a ``global``/``nonlocal`` of the name anywhere counts
    twice, so such a name is never taken as bound once); None after ``from ... import *``,
    which may bind any name."""
    counts: dict[str, int] = {}
    for node in scope_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] = counts.get(node.name, 0) + 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound = alias.asname or alias.name.partition(".")[0]
                counts[bound] = counts.get(bound, 0) + 1
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for each in node.names:
                counts[each] = counts.get(each, 0) + 2
    return counts


def bindings_anywhere(tree: ast.Module) -> Mapping[str, int] | None:
    """How many times each name is bound anywhere in the module, in any scope (``def``,
    ``class``, imports, assignment and loop targets, parameters, and a ``global`` or
    ``nonlocal`` of the name); None after ``from ... import *``, which may bind any name.
    A name counted once means one object wherever the module spells it."""
    counts: dict[str, int] = {}

    def add(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            add(node.id)
        elif isinstance(node, ast.arg):
            add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                add(alias.asname or alias.name.partition(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for each in node.names:
                add(each)
    return counts


def _runs_outside(node: ast.AST) -> list[ast.AST]:
    """The parts of a nested ``def``/``class``/``lambda`` that run in the enclosing scope."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords]
    arguments = node.args  # type: ignore[attr-defined]
    parts: list[ast.AST] = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts.extend(node.decorator_list)
    return parts
