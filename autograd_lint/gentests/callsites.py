"""Literal ``apply`` call sites in the analysed code: ``Square.apply(torch.randn(3, 4), 2)``.

Both ``Name.apply(...)`` (also ``module.Name.apply(...)``) and calls of an alias
bound by ``square = Square.apply`` are found.  A call is kept only when every
argument is positional and is a literal or a tensor constructor with literal
sizes (see :mod:`.literals`); the class is identified by its name, matched to
Functions by :func:`match_call_sites`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from autograd_lint.gentests.inputs import InputCase, normalise_case
from autograd_lint.gentests.literals import input_of
from autograd_lint.model.analysis import python_rejects
from autograd_lint.model.source import SourceError, SourceFile
from autograd_lint.model.spec import FunctionSpec


@dataclass(frozen=True)
class CallSite:
    """A literal ``apply`` call of the class called ``class_name`` (last dotted part)."""

    class_name: str
    path: str
    line: int
    case: InputCase


def _dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _applied_class(node: cst.BaseExpression) -> str | None:
    """``Square`` for ``Square.apply`` or ``ops.Square.apply``."""
    if isinstance(node, cst.Attribute) and node.attr.value == "apply":
        dotted = _dotted(node.value)
        return dotted.rsplit(".", 1)[-1] if dotted else None
    return None


class _Collector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, path: str) -> None:
        self.path = path
        self.torch_names: set[str] = set()
        self.aliases: dict[str, str] = {}  # name bound to X.apply -> X
        self.calls: list[tuple[str, int, cst.Call]] = []

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if _dotted(alias.name) == "torch":
                bound = alias.asname.name if alias.asname else None
                self.torch_names.add(bound.value if isinstance(bound, cst.Name) else "torch")

    def visit_Assign(self, node: cst.Assign) -> None:
        applied = _applied_class(node.value)
        if applied is None:
            return
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.aliases[target.target.value] = applied

    def visit_Call(self, node: cst.Call) -> None:
        applied = _applied_class(node.func)
        if applied is None and isinstance(node.func, cst.Name):
            applied = self.aliases.get(node.func.value)
        if applied is not None:
            line = self.get_metadata(PositionProvider, node).start.line
            self.calls.append((applied, line, node))


def find_call_sites(source: SourceFile) -> list[CallSite]:
    """The literal ``apply`` calls of a file, in source order.

    Raises :class:`SourceError` when the file does not parse.
    """
    path = source.path
    if ".apply" not in source.text:
        return []
    problem = python_rejects(source.text, path)
    if problem is not None:
        raise SourceError(path, *problem)
    try:
        module = cst.parse_module(source.text)
    except cst.ParserSyntaxError as error:
        raise SourceError(path, f"syntax error: {error.message}", error.raw_line) from None
    collector = _Collector(path)
    MetadataWrapper(module, unsafe_skip_copy=True).visit(collector)
    torch_names = frozenset(collector.torch_names or {"torch"})
    sites: list[CallSite] = []
    for class_name, line, call in collector.calls:
        if any(arg.keyword is not None or arg.star for arg in call.args):
            continue
        inputs = [input_of(arg.value, torch_names) for arg in call.args]
        if any(i is None for i in inputs):
            continue
        case = normalise_case(tuple(i for i in inputs if i is not None))
        sites.append(CallSite(class_name, path, line, case))
    return sites


def match_call_sites(spec: FunctionSpec, sites: Iterable[CallSite], specs: Sequence[FunctionSpec]) -> list[InputCase]:
    """The cases of the call sites that call ``spec``.

    A name defined by several analysed Functions is attributed only to the one
    in the calling file; elsewhere it is ambiguous and ignored.
    """
    same_name = [s for s in specs if s.name == spec.name]
    cases = []
    for site in sites:
        if site.class_name != spec.name:
            continue
        site_path = os.path.realpath(site.path)
        local = [s for s in same_name if os.path.realpath(s.path) == site_path]
        candidates = local or same_name
        if len(candidates) == 1 and candidates[0] is spec:
            cases.append(site.case)
    return cases
