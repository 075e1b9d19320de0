"""What a function of the same module does with the arguments a method passes it: which
parameters it writes in place, and how often it reads ``<parameter>.saved_tensors``.

``backward`` often hands its gradient to a helper of its module (``_all_reduce(grad)``,
whose body calls ``dist.all_reduce(tensor)``), or its ``ctx`` to a shared implementation
(``Base._backward(ctx, grad)``, which reads ``ctx.saved_tensors``): what the helper does
to the argument, the caller does.  A helper is a module-level function, or a
``@staticmethod`` of a module-level class called as ``Class.method(...)``; it is read
only where what it does with an argument is decided by its own text: defined once,
undecorated (but for ``@staticmethod``), directly in the module body or the class body
(no other binding of its name anywhere in the module or class, no ``global`` of it, no
``from ... import *``), not calling itself, and whose tests (``if``, ``while``,
``assert``, conditional expressions) read no parameter other than through an attribute
(``x.is_contiguous()`` is data; ``if inplace:`` or ``if out is None:`` makes the path
depend on the caller's arguments).  Its body gets its own semantic model
(:func:`semantic.build`), so "written in place" is the model's one definition
(:attr:`MethodModel.inplace_writes`): a parameter is written when one of those writes
reaches its object on some path; a rebinding first (``t = t.clone()``) makes a new
value, views and ``.detach()`` of it do not.  Shape-only changes (``unsqueeze_``),
self-copies and ``inplace=`` flags that are not a literal ``True`` are left out.
A helper that passes its parameter on to another helper does what that one does, to a
depth of :data:`MAX_DEPTH` helpers; the call that closes a cycle of helpers is not
followed (so a helper first read inside a cycle may count fewer reads or writes: the
silent side).

Read on a rule's request, once per module and helper name.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from dataclasses import dataclass
from typing import Iterator, Mapping

import libcst as cst

from autograd_lint.model import flow, semantic, sequences, traverse
from autograd_lint.model.exprs import SAVED_ATTRIBUTES
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.scopes import module_bindings, scope_nodes
from autograd_lint.model.semantic import SHAPE_ONLY_INPLACE, HelperCall, InplaceWrite, MethodModel
from autograd_lint.model.source import python_tree, split_lines

# How many helpers deep a parameter is followed (the method's own call is the first).
MAX_DEPTH = 4


@dataclass(frozen=True)
class ParameterWrite:
    """The first in-place write of a helper's body to one of its parameters."""

    how: str  # as :attr:`InplaceWrite.how`
    line: int  # the file's line
    through: str | None


@dataclass(frozen=True)
class SavedReads:
    """How a helper reads ``<parameter>.saved_tensors`` (or ``saved_variables``): the most
    reads on one path through its body (reads by the helpers it passes the parameter to
    included), and the file's line of its first read."""

    most: int
    line: int


@dataclass(frozen=True)
class Helper:
    """A same-module function whose in-place writes to its parameters are known."""

    name: str  # as called: ``f`` or ``Class.method``
    positional: tuple[str, ...]  # parameters an argument can fill by position, in order
    keyword: frozenset[str]  # parameters an argument can fill by name
    writes: Mapping[str, ParameterWrite]  # parameter -> its first write
    saved_reads: Mapping[str, SavedReads]  # parameter -> its saved_tensors reads (some)
    returned: int | None = None  # how many values each of its returns gives (see _returned_length)


class ModuleHelpers:
    """The module's functions as helpers, read from its text on first request."""

    def __init__(self, path: str, text: str, imports: ImportMap) -> None:
        self.path = path
        self.text = text
        self.imports = imports
        self._read: dict[str, Helper | None] = {}
        self._reading: list[str] = []  # the helpers being read, outermost first

    @functools.cached_property
    def _bindings(self) -> Mapping[str, int] | None:
        tree = python_tree(self.text)
        return module_bindings(tree) if tree is not None else None

    def helper(self, name: str) -> Helper | None:
        """The helper ``name`` (``f`` or ``Class.method``) names; None where what it does
        can't be told, and for a helper reached through a cycle or past :data:`MAX_DEPTH`."""
        if name in self._reading or len(self._reading) >= MAX_DEPTH:
            return None
        if name not in self._read:
            self._reading.append(name)
            try:
                self._read[name] = self._helper(name)
            finally:
                self._reading.pop()
        return self._read[name]

    def _helper(self, name: str) -> Helper | None:
        node = self._definition(name)
        if node is None or _calls_itself(node, "." in name) or _tests_read_parameters(node):
            return None
        lines = split_lines(self.text)[node.lineno - 1 : node.end_lineno]
        from autograd_lint.model.extract import ParsedUnit  # extract builds methods with this module's help

        try:
            # A static method's def is indented: dedent it (lines, not columns, are used).
            unit = ParsedUnit.parse(self.path, textwrap.dedent("".join(lines)), line_offset=node.lineno - 1)
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
        names = set(positional) | keyword
        writes: dict[str, ParameterWrite] = {}
        found = [(w, unit.position(w.node).line) for w in model.inplace_writes if _counts(w)]
        found += [(w, w.helper.line) for w in helper_writes(model, self) if w.helper is not None]
        for write, line in found:
            for binding in write.origins:
                if binding.how is semantic.How.PARAMETER and binding.name in names:
                    known = writes.get(binding.name)
                    if known is None or line < known.line:
                        writes[binding.name] = ParameterWrite(write.how, line, write.through)
        reads: dict[str, SavedReads] = {}
        for name_ in sorted(names):
            loads = model.attribute_loads(name_, SAVED_ATTRIBUTES)
            passed = helper_saved_reads(model, self, name_)
            weights = {id(n): 2 if model.per_item(n) else 1 for n in loads}
            weights.update({id(call): used.most for call, used in passed})
            most = flow.most_on_one_path(flow.method_body(definition), lambda n: weights.get(id(n), 0))
            if most > 0:
                line = min([unit.position(n).line for n in loads] + [used.line for _, used in passed])
                reads[name_] = SavedReads(most, line)
        return Helper(name, positional, keyword, writes, reads, _returned_length(model, definition))

    def _definition(self, name: str) -> ast.FunctionDef | None:
        """The ``def`` of the helper ``name``: a function of the module body, or a
        ``@staticmethod`` of a class of the module body (``Class.method``); None where
        the name is bound more than once, or otherwise than by that one ``def``."""
        tree = python_tree(self.text)
        bound = self._bindings
        owner, _, method = name.rpartition(".")
        if tree is None or bound is None or bound.get(owner or method) != 1:
            return None
        if not owner:
            return next(
                (s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name and not s.decorator_list),
                None,
            )
        cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == owner), None)
        if cls is None or cls.decorator_list or _class_bindings(cls).get(method) != 1:
            return None
        if any(
            isinstance(n, ast.Attribute) and n.attr == method and not isinstance(n.ctx, ast.Load)
            for n in ast.walk(tree)
        ):
            return None  # `Class.method = ...` somewhere
        return next(
            (
                s
                for s in cls.body
                if isinstance(s, ast.FunctionDef)
                and s.name == method
                and [ast.unparse(d) for d in s.decorator_list] == ["staticmethod"]
            ),
            None,
        )


def _returned_length(model: MethodModel, definition: cst.FunctionDef) -> int | None:
    """How many values the helper returns: every ``return`` gives a tuple the model spells
    out (a literal, a name only a literal reaches, literals joined), all of one length, and
    the body ends in a ``return`` (it can't fall off its end and return None); None otherwise,
    and for a generator."""
    body = definition.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    last = body.body[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return)):
        return None
    if any(isinstance(n, (cst.Yield, cst.Await)) for n in traverse.walk(body, scopes=False)):
        return None
    lengths = {None if r.elements is None else len(r.elements) for r in model.returns}
    return lengths.pop() if len(lengths) == 1 else None


def returned_count(model: MethodModel, helpers: ModuleHelpers, value: cst.BaseExpression) -> tuple[int, str] | None:
    """How many values ``value`` (a returned expression of ``model``'s body) holds when a
    same-module helper's tuple makes it up: ``helper(...)``, or tuples joined to it by ``+``
    (``(None,) + _grads(g, x, w)``); with the first such helper's name.  None otherwise."""
    if isinstance(value, cst.Call):
        name = _called_name(value.func)
        if name is None or model.is_bound(name.partition(".")[0]) or any(arg.star for arg in value.args):
            return None
        helper = helpers.helper(name)
        return None if helper is None or helper.returned is None else (helper.returned, helper.name)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        parts = [_part_count(model, helpers, side) for side in (value.left, value.right)]
        if any(part is None for part in parts):
            return None
        counted = [part for part in parts if part is not None]
        through = next((name for _, name in counted if name), None)
        return (sum(count for count, _ in counted), through) if through else None
    return None


def _part_count(model: MethodModel, helpers: ModuleHelpers, value: cst.BaseExpression) -> tuple[int, str] | None:
    """A part of a ``+``: a helper's tuple (its name), a tuple literal (no name), or None."""
    found = returned_count(model, helpers, value)
    if found is not None:
        return found
    positions = sequences.literal_positions(value, (cst.Tuple,))
    return None if positions is None else (len(positions), "")


def _helper_calls(
    model: MethodModel, helpers: ModuleHelpers
) -> Iterator[tuple[cst.Call, Helper, list[tuple[str, cst.BaseExpression]]]]:
    """The calls of ``model``'s body to same-module helpers, each with the helper and the
    parameters its arguments fill.  A call with ``*args`` or ``**kwargs`` arguments, or of
    a name the body binds, is not followed."""
    for _, call in model.calls:
        name = _called_name(call.func)
        if name is None or model.is_bound(name.partition(".")[0]) or any(arg.star for arg in call.args):
            continue
        helper = helpers.helper(name)
        if helper is None:
            continue
        filled: list[tuple[str, cst.BaseExpression]] = []
        for position, arg in enumerate(call.args):
            if arg.keyword is None:
                parameter = helper.positional[position] if position < len(helper.positional) else None
            else:
                parameter = arg.keyword.value if arg.keyword.value in helper.keyword else None
            if parameter is not None:
                filled.append((parameter, arg.value))
        yield call, helper, filled


def helper_writes(model: MethodModel, helpers: ModuleHelpers) -> list[InplaceWrite]:
    """The in-place writes that calls of ``model``'s body make through same-module helpers:
    one per argument a helper writes, with the call as ``node`` and the argument as
    ``target``.  (The method must be defined in a class at module level.)"""
    found: list[InplaceWrite] = []
    for call, helper, filled in _helper_calls(model, helpers):
        for parameter, value in filled:
            write = helper.writes.get(parameter)
            if write is None:
                continue
            origins, through = semantic.written_bindings(value, model.reaching)
            found.append(
                InplaceWrite(
                    call, write.how, value, origins,
                    through=through or write.through, helper=HelperCall(helper.name, write.line),
                )
            )
    return found


def helper_saved_reads(model: MethodModel, helpers: ModuleHelpers, owner: str) -> list[tuple[cst.Call, SavedReads]]:
    """The calls of ``model``'s body that hand the parameter ``owner`` itself (as bound on
    entry: not a rebinding of the name) to a same-module helper that reads its
    ``saved_tensors``, with how the helper reads them."""
    found: list[tuple[cst.Call, SavedReads]] = []
    for call, helper, filled in _helper_calls(model, helpers):
        for parameter, value in filled:
            used = helper.saved_reads.get(parameter)
            if used is None or not isinstance(value, cst.Name) or value.value != owner:
                continue
            reaching = model.reaching(value)
            if reaching and all(b.how is semantic.How.PARAMETER for b in reaching):
                found.append((call, used))
                break
    return found


def _called_name(func: cst.BaseExpression) -> str | None:
    """``f`` for a call of ``f(...)``, ``C.m`` for ``C.m(...)``; None for other callees."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        return f"{func.value.value}.{func.attr.value}"
    return None


def _counts(write: InplaceWrite) -> bool:
    """Whether a helper's write changes its argument's data as the caller sees it."""
    if write.self_copy or write.how.removesuffix("()") in SHAPE_ONLY_INPLACE:
        return False
    return "inplace=" not in write.how or write.how.endswith("inplace=True)")


def _class_bindings(cls: ast.ClassDef) -> Mapping[str, int]:
    """How many times the class body binds each name."""
    counts: dict[str, int] = {}
    for node in scope_nodes(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] = counts.get(node.name, 0) + 1
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def _calls_itself(node: ast.FunctionDef, method: bool) -> bool:
    """Whether the body names the function (a static method also as ``anything.method``):
    it may call itself."""
    return any(
        (isinstance(n, ast.Name) and n.id == node.name)
        or (method and isinstance(n, ast.Attribute) and n.attr == node.name)
        for n in ast.walk(node)
    )


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
