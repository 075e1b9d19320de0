"""Where a module uses its own Function classes: through ``apply``, and otherwise.

:class:`ApplyIndex` finds the module's ``Fn.apply`` calls and aliases (AGL010,
AGL018).  The module-level rules also need the calls made on a Function class:
``Fn(...)`` (instantiation, AGL002), ``Fn(...)(...)`` (a legacy instance call,
AGL002) and ``Fn.forward(...)`` and the other autograd methods (a direct call,
AGL021).  They
are found in :attr:`FileAnalysis.whole_module`, which the analysis parses only
when such a use can exist, and each becomes one :class:`FunctionUse` with the
guards written around it.

A name counts as a Function class only when Python's scoping rules bind it to
exactly one ``class`` statement of a Function in this module (``Outer.Inner``
follows nested class statements); a parameter, a local or a second binding of
the same name makes the call unknown, and unknown calls are left out.  Functions
imported from other modules are out of scope, and so are aliases such as
``f = Fn.apply`` except in :class:`ApplyIndex`.
"""

from __future__ import annotations

import ast
import bisect
import enum
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import PurePath
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import Assignment, GlobalScope, MetadataWrapper, Scope, ScopeProvider

from autograd_lint.model import semantic, traverse
from autograd_lint.model.exprs import Classifier
from autograd_lint.model.source import python_tree
from autograd_lint.model.spec import FUNCTION_METHODS, FunctionSpec, Kind, Position

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.model.extract import ParsedUnit

# Conditions under which calling forward directly is deliberate: autograd is off
# (no_grad, inference), the model is in eval mode, or the code is being exported,
# scripted or traced.  Either arm of such an ``if`` counts, since code often
# tests ``if torch.is_grad_enabled(): ... else: Fn.forward(None, x)``.
_GUARD = re.compile(
    r"is_grad_enabled|grad_enabled|no_grad|inference_mode|is_inference|\btraining\b"
    r"|onnx|is_scripting|is_tracing|requires_grad|\bexport",
    re.IGNORECASE,
)
# Context managers that switch gradient recording off.
_GRAD_OFF = re.compile(r"no_grad|inference_mode|set_grad_enabled\(\s*False")
# Context managers of tests that expect the code inside to fail or warn.
_EXPECTS_FAILURE = re.compile(r"\b(?:raises|assertRaises\w*|assertWarns\w*|warns|deprecated_call)\b")
_TEST_DIRS = frozenset({"test", "tests", "testing"})
# Parameter names that hold a ctx handed down by a caller.
_CTX_PARAMETER = re.compile(r"^(?:ctx|context|\w+_ctx)$")


class UseKind(enum.Enum):
    """What a use of a Function class does."""

    INSTANTIATION = "instantiation"  # Fn(...)
    INSTANCE_CALL = "instance call"  # Fn(...)(...)
    METHOD_CALL = "method call"  # Fn.forward(...), Fn.backward(...), ...


@dataclass(frozen=True)
class FunctionUse:
    """One call on a Function class of this module.

    ``method`` names the autograd method of a :attr:`UseKind.METHOD_CALL`.
    ``inside`` is the qualified name of the Function whose class body holds the
    call (innermost), if any.  ``guard`` is the source of the grad-disabled /
    eval / export condition or context manager the call sits under, if any, and
    ``expects_failure`` tells that it sits in a ``pytest.raises`` /
    ``assertRaises`` / ``assertWarns`` block.  ``passes_ctx`` tells that the first
    argument is a ``ctx``-named parameter of the enclosing function: a helper that
    receives a real ctx from some Function's forward or backward.  ``class_methods``
    tells whether the
    class overrides ``__init__``/``__call__``, which changes what a use does.
    """

    function: FunctionSpec
    kind: UseKind
    position: Position
    text: str
    method: str | None = None
    inside: str | None = None
    guard: str | None = None
    expects_failure: bool = False
    passes_ctx: bool = False
    # Names of every method the class and its Function bases define, or None
    # when one of them is outside this module (or has a base that is).
    class_methods: frozenset[str] | None = None


def is_test_path(path: str) -> bool:
    """True for test modules: ``test_*.py``, ``*_test.py``, ``conftest.py`` or a file under a test directory."""
    pure = PurePath(path)
    name = pure.name
    if name.startswith("test_") or name.endswith("_test.py") or name in ("conftest.py", "tests.py"):
        return True
    return any(part in _TEST_DIRS for part in pure.parts[:-1])


def scopes_of(unit: "ParsedUnit") -> Mapping[cst.CSTNode, Scope | None]:
    """libcst's scopes of a whole module (``unit``): the most expensive step of both
    indexes, resolved once per analysis (:attr:`FileAnalysis.scopes`)."""
    return MetadataWrapper(unit.module, unsafe_skip_copy=True).resolve(ScopeProvider)


def function_uses(analysis: "FileAnalysis") -> list[FunctionUse]:
    """Every call on a Function class of this module, in source order; empty unless the
    whole module was parsed (see :mod:`autograd_lint.model.analysis`).  Rules ask
    :attr:`FileAnalysis.function_uses`, which finds them once per analysis."""
    unit = analysis.whole_module
    if unit is None or not analysis.functions:
        return []
    by_position = {
        spec.position: spec
        for spec in analysis.functions
        if analysis.units.get(spec.qualname) is unit
    }
    if not by_position:
        return []
    visitor = _UseVisitor(unit, by_position, lambda: analysis.scopes, _lines_naming(analysis.source.text, by_position))
    traverse.visit(unit.module, visitor)
    uses = [replace(use, class_methods=_class_methods(use.function, visitor.defined)) for use in visitor.uses]
    return sorted(uses, key=lambda use: (use.position.line, use.position.column))


def _lines_naming(text: str, by_position: Mapping[Position, FunctionSpec]) -> list[int] | None:
    """The lines of ``text`` where a Function's name is written, in order; None for a text
    with a carriage return, whose lines libcst may count otherwise (every statement is walked)."""
    if "\r" in text:
        return None
    names = re.compile(r"\b(?:" + "|".join(sorted({re.escape(s.name) for s in by_position.values()})) + r")\b")
    return [number for number, line in enumerate(text.split("\n"), 1) if names.search(line)]


def _class_methods(function: FunctionSpec, defined: Mapping[str, frozenset[str]]) -> frozenset[str] | None:
    names: set[str] = set()
    for spec in function.mro():
        if not spec.complete or spec.path != function.path or spec.qualname not in defined:
            return None
        names |= defined[spec.qualname]
    return frozenset(names)


def single_binding(name: cst.Name, scopes: Mapping[cst.CSTNode, Scope | None]) -> cst.CSTNode | None:
    """The node that binds ``name`` where it is used, when Python's scoping gives exactly one."""
    scope = scopes.get(name)
    if scope is None:
        return None
    assignments = list(scope[name.value])
    if len(assignments) != 1 or not isinstance(assignments[0], Assignment):
        return None
    return assignments[0].node


def named_class(expr: cst.BaseExpression, scopes: Mapping[cst.CSTNode, Scope | None]) -> cst.ClassDef | None:
    """The single ``class`` statement ``expr`` names (``Outer.Inner`` follows nested
    class statements), if syntax can tell."""
    if isinstance(expr, cst.Name):
        node = single_binding(expr, scopes)
        return node if isinstance(node, cst.ClassDef) else None
    if isinstance(expr, cst.Attribute):
        outer = named_class(expr.value, scopes)
        if outer is None or not isinstance(outer.body, cst.IndentedBlock):
            return None
        inner = [s for s in outer.body.body if isinstance(s, cst.ClassDef) and s.name.value == expr.attr.value]
        return inner[0] if len(inner) == 1 else None
    return None


_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class _UseVisitor(cst.CSTVisitor):
    """Collects :class:`FunctionUse` values, keeping the chain of enclosing nodes."""

    def __init__(
        self,
        unit: "ParsedUnit",
        by_position: Mapping[Position, FunctionSpec],
        module_scopes: Callable[[], Mapping[cst.CSTNode, Scope | None]],
        naming: list[int] | None = None,
    ) -> None:
        self.unit = unit
        # The file's lines that spell a Function's name: a use is a call whose last name is
        # one, so a statement on none of them holds none and is not walked (None: walk all).
        self.naming = naming
        self.by_position = by_position
        self.module_scopes = module_scopes  # resolved only when a use can't be decided locally
        self.names = frozenset(spec.name for spec in by_position.values())
        self.local_scopes: dict[cst.FunctionDef, Mapping[cst.CSTNode, Scope | None]] = {}
        self.stack: list[cst.CSTNode] = []
        self.uses: list[FunctionUse] = []
        self.specs: dict[cst.ClassDef, FunctionSpec] = {}
        self.defined: dict[str, frozenset[str]] = {}  # Function qualname -> its method names
        self.instance_called: set[cst.Call] = set()  # inner calls of Fn(...)(...)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.naming is not None and isinstance(node, _STATEMENTS) and not self._names_a_function(node):
            self.stack.append(node)  # popped by on_leave, which the walk calls all the same
            return False
        if isinstance(node, cst.ClassDef):
            spec = self.by_position.get(self.unit.position(node))
            if spec is not None:
                self.specs[node] = spec
                body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
                self.defined[spec.qualname] = frozenset(
                    s.name.value for s in body if isinstance(s, cst.FunctionDef)
                )
        elif isinstance(node, cst.Call):
            self._call(node)
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def _names_a_function(self, statement: cst.BaseStatement) -> bool:
        """Whether a line of ``statement`` (decorators included) spells a Function's name."""
        assert self.naming is not None
        first = self.unit.position(statement).line
        decorators = getattr(statement, "decorators", ())
        if decorators:
            first = min(first, self.unit.position(decorators[0]).line)
        at = bisect.bisect_left(self.naming, first)
        return at < len(self.naming) and self.naming[at] <= self.unit.end_line(statement)

    # -- resolving names to Function classes ------------------------------------
    def _function(self, expr: cst.BaseExpression) -> FunctionSpec | None:
        # A class statement binds its own name: only a call whose last name is a
        # Function's can name one, and only those are resolved (gated by name).
        last = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else None
        if last not in self.names:
            return None
        root = expr
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return None
        node = named_class(expr, self._scopes_deciding(root))
        return self.specs.get(node) if node is not None else None

    def _scopes_deciding(self, name: cst.Name) -> Mapping[cst.CSTNode, Scope | None]:
        """Scopes that bind ``name`` (at its use) as the whole module's do, from the smallest code that decides it.

        When an enclosing ``def`` binds the name itself (and nothing in it declares the
        name ``global`` or ``nonlocal``), Python resolves the use inside that ``def``
        alone: libcst's scopes of that ``def``, as a module of its own made of the same
        nodes, give the same bindings, at a cost that follows the ``def``, not the file.
        Otherwise the whole module's scopes, resolved once.
        """
        for node in reversed(self.stack):
            if not isinstance(node, cst.FunctionDef):
                continue
            if node not in self.local_scopes:
                module = cst.Module(body=[node])
                self.local_scopes[node] = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
            scopes = self.local_scopes[node]
            scope = scopes.get(name)
            if scope is None:
                continue
            assignments = list(scope[name.value])
            if assignments and not any(isinstance(a.scope, GlobalScope) for a in assignments):
                if re.search(rf"\b(?:global|nonlocal)\b[^\n;]*\b{re.escape(name.value)}\b", self.unit.code(node)):
                    break
                return scopes
        return self.module_scopes()

    # -- recording ----------------------------------------------------------------
    def _call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Call):
            spec = self._function(func.func)
            if spec is not None:
                self.instance_called.add(func)
                self._record(node, spec, UseKind.INSTANCE_CALL)
                return
        if node in self.instance_called:
            return
        if isinstance(func, cst.Attribute) and func.attr.value in FUNCTION_METHODS:
            spec = self._function(func.value)
            if spec is not None:
                self._record(node, spec, UseKind.METHOD_CALL, func.attr.value)
            return
        spec = self._function(func)
        if spec is not None:
            self._record(node, spec, UseKind.INSTANTIATION)

    def _record(self, node: cst.Call, spec: FunctionSpec, kind: UseKind, method: str | None = None) -> None:
        text = " ".join(self.unit.code(node).split())
        if len(text) > 60:
            text = text[:57] + "..."
        inside = next(
            (self.specs[n].qualname for n in reversed(self.stack) if isinstance(n, cst.ClassDef) and n in self.specs),
            None,
        )
        guard, expects_failure = self._guards(node)
        self.uses.append(
            FunctionUse(
                spec,
                kind,
                self.unit.position(node),
                text,
                method,
                inside,
                guard,
                expects_failure,
                self._passes_ctx(node),
            )
        )

    def _passes_ctx(self, node: cst.Call) -> bool:
        if not node.args or node.args[0].keyword is not None or node.args[0].star:
            return False
        first = node.args[0].value
        if not isinstance(first, cst.Name) or not _CTX_PARAMETER.match(first.value):
            return False
        function = next((n for n in reversed(self.stack) if isinstance(n, cst.FunctionDef)), None)
        if function is None:
            return False
        params = function.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        return any(p.name.value == first.value for p in every)

    def _guards(self, node: cst.Call) -> tuple[str | None, bool]:
        """The guard around ``node`` (innermost first) and whether a test expects it to fail."""
        guard: str | None = None
        expects_failure = False
        chain = [*self.stack, node]
        for parent, child in zip(reversed(chain[:-1]), reversed(chain[1:])):
            found: str | None = None
            if isinstance(parent, (cst.If, cst.IfExp, cst.While)) and child is not parent.test:
                found = self._matching(parent.test, _GUARD)
            elif isinstance(parent, cst.With):
                for item in parent.items:
                    found = found or self._matching(item.item, _GRAD_OFF)
                    expects_failure = expects_failure or self._matching(item.item, _EXPECTS_FAILURE) is not None
            elif isinstance(parent, cst.FunctionDef):
                for decorator in parent.decorators:
                    found = found or self._matching(decorator.decorator, _GRAD_OFF)
            elif isinstance(parent, (cst.IndentedBlock, cst.Module)):
                found = self._earlier_exit(parent.body, child)
            if guard is None:
                guard = found
        return guard, expects_failure

    def _earlier_exit(self, body: Sequence[cst.CSTNode], child: cst.CSTNode) -> str | None:
        """A guard ``if`` before ``child`` in the same block whose body leaves it.

        ``if torch.is_grad_enabled(): return Fn.apply(x)`` followed by
        ``return Fn.forward(None, x)`` puts the second call under the guard.
        """
        for statement in body:
            if statement is child:
                return None
            if isinstance(statement, cst.If) and _leaves(statement.body):
                found = self._matching(statement.test, _GUARD)
                if found is not None:
                    return found
        return None

    def _matching(self, node: cst.CSTNode, pattern: re.Pattern[str]) -> str | None:
        text = " ".join(self.unit.code(node).split())
        return text if pattern.search(text) else None


def _leaves(suite: cst.BaseSuite) -> bool:
    """The last statement of ``suite`` is ``return``, ``raise``, ``continue`` or ``break``."""
    if isinstance(suite, cst.IndentedBlock):
        if not suite.body:
            return False
        last = suite.body[-1]
        if not isinstance(last, cst.SimpleStatementLine):
            return False
        small = last.body
    else:
        small = suite.body  # type: ignore[attr-defined]
    return bool(small) and isinstance(small[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break))


class ApplyIndex:
    """The module's uses of ``Fn.apply`` for its own Function classes.

    ``Fn`` counts only when Python's scoping binds it to exactly one ``class``
    statement of a Function of this module (``Outer.Inner`` follows nested class
    statements); an alias ``f = Fn.apply`` counts when ``f`` has that one binding.
    Built from :attr:`FileAnalysis.whole_module`, which the analysis parses when
    the text shows such a use.
    """

    def __init__(self, analysis: "FileAnalysis") -> None:
        unit = analysis.whole_module
        assert unit is not None
        self.unit = unit
        self.imports = analysis.imports
        self.functions = analysis.functions
        self._models: dict[cst.FunctionDef, semantic.MethodModel] = {}
        positions = {
            spec.position: spec for spec in analysis.functions if analysis.units.get(spec.qualname) is unit
        }
        self.scopes = analysis.scopes
        self.specs: dict[cst.ClassDef, FunctionSpec] = {}
        self.values: dict[cst.Name, cst.BaseExpression] = {}  # `name = value` targets
        self.calls: list[cst.Call] = []
        self.defs: list[cst.FunctionDef] = []
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        index = self

        class _Collect(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                for child in node.children:
                    index.parents[child] = node
                if isinstance(node, cst.ClassDef) and unit.position(node) in positions:
                    index.specs[node] = positions[unit.position(node)]
                elif isinstance(node, cst.Assign):
                    for target in node.targets:
                        if isinstance(target.target, cst.Name):
                            index.values[target.target] = node.value
                elif isinstance(node, cst.Call):
                    index.calls.append(node)
                elif isinstance(node, cst.FunctionDef):
                    index.defs.append(node)
                return True

        traverse.visit(unit.module, _Collect())

    def binding(self, name: cst.Name) -> cst.CSTNode | None:
        """The node that binds ``name`` where it is used, when there is exactly one
        (for ``name = value``, the value)."""
        node = single_binding(name, self.scopes)
        return self.values.get(node, node) if isinstance(node, cst.Name) else node

    def function_class(self, expr: cst.BaseExpression) -> FunctionSpec | None:
        """The Function ``expr`` names (``Fn`` or ``Outer.Fn``), if syntax can tell."""
        node = named_class(expr, self.scopes)
        return self.specs.get(node) if node is not None else None

    def applied(self, expr: cst.BaseExpression) -> FunctionSpec | None:
        """The Function whose ``apply`` ``expr`` is: ``Fn.apply``, or an alias of it."""
        if isinstance(expr, cst.Attribute) and expr.attr.value == "apply":
            return self.function_class(expr.value)
        if isinstance(expr, cst.Name):
            value = self.binding(expr)
            if isinstance(value, cst.Attribute) and value.attr.value == "apply":
                return self.function_class(value.value)
        return None

    def applied_calls(self) -> Iterator[tuple[cst.Call, FunctionSpec]]:
        """Each call of a Function's ``apply`` (``Fn.apply(...)``, or through an alias), in
        source order, with that Function."""
        for call in self.calls:
            function = self.applied(call.func)
            if function is not None:
                yield call, function

    def enclosing_def(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, cst.FunctionDef):
            parent = self.parents.get(parent)
        return parent

    def kinds_around(self, call: cst.Call) -> Callable[[cst.BaseExpression], Kind]:
        """How the code around ``call`` types an expression: the semantic model of the
        enclosing function (a Function's method has one already; others are built once),
        or, at module level, the expression alone."""
        enclosing = self.enclosing_def(call)
        if enclosing is None:
            return Classifier(self.imports, {}).kind
        if enclosing not in self._models:
            self._models[enclosing] = self._method_model(enclosing) or semantic.build(enclosing, self.imports)
        return self._models[enclosing].kind

    def _method_model(self, function: cst.FunctionDef) -> semantic.MethodModel | None:
        """The semantic model the analysis built, when ``function`` is a Function's method."""
        for spec in self.functions:
            for method in spec.methods.values():
                if method.node is function:
                    return method.semantic
        return None


@dataclass(frozen=True)
class ApplyCall:
    """A ``Name.apply(...)`` call without ``*``/``**`` arguments: where, and how many arguments."""

    line: int
    arguments: int
    column: int = 0


@lru_cache(maxsize=16)
def apply_calls(text: str) -> Mapping[str, tuple[ApplyCall, ...]]:
    """The ``Name.apply(...)`` calls of a module, by the name before ``.apply``.

    Read with :mod:`ast` (a small fraction of a libcst parse), and only by the rules
    that need call sites for a Function whose other facts leave them undecided;
    empty when the text does not parse.  Names are taken as written: the caller
    checks that the name can only mean its Function.
    """
    tree = python_tree(text)
    if tree is None:
        return {}
    found: dict[str, list[ApplyCall]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        if func.attr != "apply" or not isinstance(func.value, ast.Name):
            continue
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        found.setdefault(func.value.id, []).append(ApplyCall(node.lineno, len(node.args), node.col_offset))
    return {name: tuple(calls) for name, calls in found.items()}
