"""``Fn.apply(...)`` calls of a Function imported from another module, and what the whole
run's calls agree a Function's ``apply`` passes.

A Function is often applied only in another file (``from .ops import Scale`` in a
``functional.py``), so whether a combined-style forward's defaulted parameter is passed
can only be said once every file of the run is read.  Each file lists its calls of
``apply`` on an imported name (:func:`apply_sites`); discovery gathers them and decides,
per Function, one count every call agrees on (:func:`agreed_arities`), or nothing.
Calls on a name the file defines itself are the file's own business (see
:func:`autograd_lint.model.usage.apply_calls`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from autograd_lint.model.imports import ImportMap
from autograd_lint.model.source import python_tree

if TYPE_CHECKING:
    from autograd_lint.model.spec import FunctionSpec


# ``head.rest.apply`` as text (not ``apply_``, the in-place method): the head word.
_APPLY_HEAD = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)*\.apply\b(?!_)")


@dataclass(frozen=True)
class ApplySite:
    """A use of ``apply`` on an imported name: the qualified name it resolves to, and
    how many arguments the call passes (None: not a plain call, or ``*``/keyword arguments)."""

    target: str
    arguments: int | None
    line: int


@dataclass(frozen=True)
class RunApply:
    """The count every ``apply`` call of a Function in the run passes, and one such call."""

    arguments: int
    path: str
    line: int


def apply_sites(text: str, imports: ImportMap) -> tuple[ApplySite, ...]:
    """Every ``X.apply`` of ``text`` whose ``X`` (a name or dotted name) is imported.

    Read with :mod:`ast` only when the text shows ``.apply`` on a dotted name whose head
    is imported (most files of torch that show ``.apply`` don't: a full parse of them cost
    a third of a run over torch); empty when it does not parse.
    A reference that is not called directly (``f = Fn.apply``, ``map(Fn.apply, ...)``)
    is a site with unknown arguments: its calls can't be counted.
    """
    if ".apply" not in text:
        return ()
    if all(match.group(1) not in imports.aliases for match in _APPLY_HEAD.finditer(text)):
        return ()
    tree = python_tree(text)
    if tree is None:
        return ()
    called: dict[int, ast.Call] = {}
    attributes: list[ast.Attribute] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called[id(node.func)] = node
        elif isinstance(node, ast.Attribute) and node.attr == "apply":
            attributes.append(node)
    sites = []
    for attribute in attributes:
        dotted = ast_dotted_name(attribute.value)
        target = imports.resolve(dotted) if dotted is not None else None
        if target is None:
            continue
        call = called.get(id(attribute))
        plain = call is not None and not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)
        sites.append(ApplySite(target, len(call.args) if plain and call is not None else None, attribute.lineno))
    return tuple(sorted(sites, key=lambda site: site.line))  # ast.walk goes breadth first


def agreed_arities(
    sites: Iterable[tuple[str, ApplySite]], known: Mapping[str, FunctionSpec]
) -> dict[str, RunApply]:
    """For each Function (by full name) whose sites all pass one count, that count and its
    first call (by path, then line).  ``sites`` are (path, site) pairs of the whole run;
    ``known`` maps every name a Function can be imported by to it.  A Function with any
    site of unknown arguments, or with calls that disagree, gets nothing; so does one
    whose class name a site names through an import that resolves to no Function (a
    re-export such as ``from pkg import Fn``, maybe this one) with another count."""
    grouped: dict[str, list[tuple[str, ApplySite]]] = {}
    unresolved: dict[str, set[int | None]] = {}
    for path, site in sites:
        function = known.get(site.target)
        if function is not None:
            grouped.setdefault(function.full_name, []).append((path, site))
        else:
            unresolved.setdefault(site.target.rsplit(".", 1)[-1], set()).add(site.arguments)
    agreed: dict[str, RunApply] = {}
    for name, found in grouped.items():
        counts = {site.arguments for _, site in found} | unresolved.get(name.rsplit(".", 1)[-1], set())
        if len(counts) != 1 or None in counts:
            continue
        path, site = min(found, key=lambda pair: (pair[0], pair[1].line))
        assert site.arguments is not None
        agreed[name] = RunApply(site.arguments, path, site.line)
    return agreed


def ast_dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a name; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
