"""Which parameters a function of the same module writes in place, and the calls that pass
a method's values to it.

``backward`` often hands its gradient to a helper of its module (``_all_reduce(grad)``,
whose body calls ``dist.all_reduce(tensor)``): the helper's in-place write is a write to
the caller's tensor.  A helper is read only where what it does with an argument is
decided by its own text: a function defined once, undecorated, directly in the module
body (no other binding of its name anywhere in the module, no ``global`` of it, no
``from ... import *``), that does not call itself, and whose tests (``if``, ``while``,
``assert``, conditional expressions) read no parameter other than through an attribute
(``x.is_contiguous()`` is data; ``if inplace:`` or ``if out is None:`` makes the path
depend on the caller's arguments).  Its body gets its own semantic model
(:func:`semantic.build`), so "written in place" is the model's one definition
(:attr:`MethodModel.inplace_writes`): a parameter is written when one of those writes
reaches its object on some path; a rebinding first (``t = t.clone()``) makes a new
value, views and ``.detach()`` of it do not.  Shape-only changes (``unsqueeze_``),
self-copies and ``inplace=`` flags that are not a literal ``True`` are left out.

Read on a rule's request, once per module and helper name.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Mapping

import libcst as cst

from autograd_lint.model import semantic
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.semantic import SHAPE_ONLY_INPLACE, HelperCall, InplaceWrite, MethodModel
from autograd_lint.model.source import python_tree, split_lines


# What :meth:`ModuleHelpers._bindings` keeps for a module with a star import.
_STAR: dict[str, int] = {}


@dataclass(frozen=True)
class ParameterWrite:
    """The first in-place write of a helper's body to one of its parameters."""

    how: str  # as :attr:`InplaceWrite.how`
    line: int  # the file's line
    through: str | None


@dataclass(frozen=True)
class Helper:
    """A same-module function whose in-place writes to its parameters are known."""

    name: str
    positional: tuple[str, ...]  # parameters an argument can fill by position, in order
    keyword: frozenset[str]  # parameters an argument can fill by name
    writes: Mapping[str, ParameterWrite]  # parameter -> its first write


class ModuleHelpers:
    """The module's functions as helpers, read from its text on first request."""

    def __init__(self, path: str, text: str, imports: ImportMap) -> None:
        self.path = path
        self.text = text
        self.imports = imports
        self._read: dict[str, Helper | None] = {}
        self._bound: dict[str, int] | None = None  # see _bindings

    def helper(self, name: str) -> Helper | None:
        """The helper ``name`` names at module level; None where what it writes can't be told."""
        if name not in self._read:
            self._read[name] = self._helper(name)
        return self._read[name]

    def _helper(self, name: str) -> Helper | None:
        tree = python_tree(self.text)
        bound = self._bindings(tree) if tree is not None else None
        if bound is None or bound.get(name) != 1:
            return None
        node = next(
            (s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name and not s.decorator_list),
            None,
        )
        if node is None or _calls_itself(node) or _tests_read_parameters(node):
            return None
        lines = split_lines(self.text)[node.lineno - 1 : node.end_lineno]
        from autograd_lint.model.extract import ParsedUnit  # extract builds methods with this module's help

        try:
            unit = ParsedUnit.parse(self.path, "".join(lines), line_offset=node.lineno - 1)
        except cst.ParserSyntaxError:
            return None
        body = unit.module.body
        if len(body) != 1 or not isinstance(body[0], cst.FunctionDef):
            return None  # the ast line range should hold the def alone; if not, do not guess
        definition = body[0]
        model = semantic.build(definition, self.imports)
        params = definition.params
        positional = tuple(p.name.value for p in (*params.posonly_params, *params.params))
        keyword = frozenset(p.name.value for p in (*params.params, *params.kwonly_params))
        writes: dict[str, ParameterWrite] = {}
        for write in model.inplace_writes:
            if not _counts(write):
                continue
            for binding in write.origins:
                if binding.how is semantic.How.PARAMETER and binding.name in positional + tuple(keyword):
                    line = unit.position(write.node).line
                    known = writes.get(binding.name)
                    if known is None or line < known.line:
                        writes[binding.name] = ParameterWrite(write.how, line, write.through)
        return Helper(name, positional, keyword, writes)

    def _bindings(self, tree: ast.Module) -> Mapping[str, int] | None:
        """How many times the module binds each name at module level (a ``global`` of it in
        a function counts as many); None after a ``from ... import *``, which may bind any."""
        if self._bound is None:
            counts: dict[str, int] = {}
            for node in _module_scope(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    counts[node.name] = counts.get(node.name, 0) + 1
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        if alias.name == "*":
                            self._bound = _STAR
                            return None
                        bound = alias.asname or alias.name.partition(".")[0]
                        counts[bound] = counts.get(bound, 0) + 1
                elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    counts[node.id] = counts.get(node.id, 0) + 1
            for node in ast.walk(tree):
                if isinstance(node, (ast.Global, ast.Nonlocal)):
                    for each in node.names:
                        counts[each] = counts.get(each, 0) + 2
            self._bound = counts
        return None if self._bound is _STAR else self._bound


def helper_writes(model: MethodModel, helpers: ModuleHelpers) -> list[InplaceWrite]:
    """The in-place writes that calls of ``model``'s body make through same-module helpers:
    one per argument a helper writes, with the call as ``node`` and the argument as
    ``target``.  A call with ``*args`` or ``**kwargs`` arguments, or of a name the body
    binds, is not followed (the method must be defined in a class at module level)."""
    found: list[InplaceWrite] = []
    for callee, call in model.calls:
        if not isinstance(call.func, cst.Name) or model.is_bound(callee or ""):
            continue
        if any(arg.star for arg in call.args):
            continue
        helper = helpers.helper(call.func.value)
        if helper is None or not helper.writes:
            continue
        for position, arg in enumerate(call.args):
            if arg.keyword is None:
                parameter = helper.positional[position] if position < len(helper.positional) else None
            else:
                parameter = arg.keyword.value if arg.keyword.value in helper.keyword else None
            write = helper.writes.get(parameter) if parameter is not None else None
            if write is None:
                continue
            origins, through = semantic.written_bindings(arg.value, model.reaching)
            found.append(
                InplaceWrite(
                    call, write.how, arg.value, origins,
                    through=through or write.through, helper=HelperCall(helper.name, write.line),
                )
            )
    return found


def _counts(write: InplaceWrite) -> bool:
    """Whether a helper's write changes its argument's data as the caller sees it."""
    if write.self_copy or write.how.removesuffix("()") in SHAPE_ONLY_INPLACE:
        return False
    return "inplace=" not in write.how or write.how.endswith("inplace=True)")


def _module_scope(tree: ast.Module) -> list[ast.AST]:
    """The nodes that bind at module level: module-level statements and what they hold,
    not the bodies of functions, classes and lambdas (their names bind the ``def``/``class``
    statements themselves), nor comprehensions' own variables."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _calls_itself(node: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Name) and n.id == node.name for n in ast.walk(node))


def _tests_read_parameters(node: ast.FunctionDef) -> bool:
    """Whether a test of the body reads a parameter other than as ``param.<attribute>``."""
    arguments = node.args
    names = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    tests: list[ast.expr] = []
    for each in ast.walk(node):
        if isinstance(each, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests.append(each.test)
        elif isinstance(each, ast.Match):
            tests.append(each.subject)
        elif isinstance(each, ast.comprehension):
            tests.extend(each.ifs)
    for test in tests:
        receivers = {id(n.value) for n in ast.walk(test) if isinstance(n, ast.Attribute)}
        if any(isinstance(n, ast.Name) and n.id in names and id(n) not in receivers for n in ast.walk(test)):
            return True
    return False
