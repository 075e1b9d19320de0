"""Arguments of a module's ``Fn.apply(...)`` calls that are certainly trainable values.

Whether a Function's input requires grad is decided by its callers, not by the Function:
a LayerNorm's mean may be computed under ``torch.no_grad()`` and passed in on purpose
without history.  A rule that blames a backward for giving an input no gradient can only
be sure where a call in the module passes something that does require grad: an
``nn.Parameter`` built in the call, a name the enclosing function binds only to one, an
attribute ``self.X`` that the enclosing class assigns an ``nn.Parameter`` (or registers
with ``register_parameter("X", ...)``), or a tensor made with ``requires_grad=True``.
Read with :mod:`ast`, like :func:`autograd_lint.model.usage.apply_calls`, and only on a
rule's request.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from autograd_lint.model.apply_sites import ast_dotted_name
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.scopes import scope_nodes
from autograd_lint.model.source import python_tree

_PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


@dataclass(frozen=True)
class TrainableArgument:
    """A positional argument of a ``Name.apply(...)`` call that requires grad: its
    position, the call's line, and the argument as written."""

    position: int
    line: int
    code: str


def trainable_arguments(text: str, imports: ImportMap) -> Mapping[str, tuple[TrainableArgument, ...]]:
    """The trainable arguments of the module's ``Name.apply(...)`` calls, by the name
    before ``.apply`` (taken as written: the caller checks that it means its Function).
    Arguments after a ``*`` argument have no known position and are left out; empty when
    the text does not parse."""
    tree = python_tree(text)
    if tree is None:
        return {}
    found: dict[str, list[TrainableArgument]] = {}
    for call, scopes in _apply_calls(tree):
        assert isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
        for position, argument in enumerate(call.args):
            if isinstance(argument, ast.Starred):
                break
            if _requires_grad(argument, scopes, imports):
                found.setdefault(call.func.value.id, []).append(
                    TrainableArgument(position, call.lineno, ast.unparse(argument))
                )
    return {name: tuple(arguments) for name, arguments in found.items()}


def _apply_calls(tree: ast.Module) -> Iterator[tuple[ast.Call, tuple[ast.AST, ...]]]:
    """Every ``Name.apply(...)`` call, with its enclosing classes and functions (innermost last)."""
    stack: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(tree, ())]
    while stack:
        node, scopes = stack.pop()
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes = (*scopes, node)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "apply"
            and isinstance(node.func.value, ast.Name)
        ):
            yield node, scopes
        stack.extend((child, scopes) for child in ast.iter_child_nodes(node))


def _requires_grad(expr: ast.expr, scopes: tuple[ast.AST, ...], imports: ImportMap) -> bool:
    """Whether ``expr`` certainly requires grad, by what its enclosing scopes show."""
    if _makes_trainable(expr, imports):
        return True
    function = next((s for s in reversed(scopes) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if isinstance(expr, ast.Name) and function is not None:
        values = list(_assigned(function, lambda t: isinstance(t, ast.Name) and t.id == expr.id))
        return bool(values) and all(v is not None and _makes_trainable(v, imports) for v in values)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and function is not None:
        owner = _first_parameter(function)
        classes = [s for s in scopes if isinstance(s, ast.ClassDef)]
        if owner != expr.value.id or not classes:
            return False
        return _class_parameter(classes[-1], expr.attr, imports)
    return False


def _makes_trainable(expr: ast.expr, imports: ImportMap) -> bool:
    """``nn.Parameter(...)``, or a call passing ``requires_grad=True``."""
    if not isinstance(expr, ast.Call):
        return False
    if _qualified(expr.func, imports) in _PARAMETER:
        return not any(k.arg == "requires_grad" and not _true(k.value) for k in expr.keywords)
    return any(k.arg == "requires_grad" and _true(k.value) for k in expr.keywords)


def _class_parameter(cls: ast.ClassDef, attr: str, imports: ImportMap) -> bool:
    """Whether a method of ``cls`` sets ``self.<attr>`` to an ``nn.Parameter`` or registers it
    as one (``self.register_parameter("attr", nn.Parameter(...))``)."""
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        owner = _first_parameter(method)
        if owner is None:
            continue

        def is_attr(target: ast.expr) -> bool:
            return (
                isinstance(target, ast.Attribute)
                and target.attr == attr
                and isinstance(target.value, ast.Name)
                and target.value.id == owner
            )

        if any(v is not None and _makes_trainable(v, imports) for v in _assigned(method, is_attr)):
            return True
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register_parameter"
                and len(node.args) == 2
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == attr
                and _makes_trainable(node.args[1], imports)
            ):
                return True
    return False


def _assigned(function: ast.AST, matches: Callable[[ast.expr], bool]) -> Iterator[ast.expr | None]:
    """The values ``function`` binds to targets ``matches`` accepts (None: a binding whose
    value can't be told, such as a tuple unpacking, a loop target or an augmented assignment).
    Nested functions, lambdas and classes bind their own names: they are not read."""
    for node in scope_nodes(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if matches(target):
                    yield node.value
                elif isinstance(target, (ast.Tuple, ast.List)) and any(matches(e) for e in ast.walk(target)):
                    yield None
        elif isinstance(node, ast.AnnAssign) and matches(node.target):
            yield node.value
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            if matches(node.target):
                yield None
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            if any(item.optional_vars is not None and matches(item.optional_vars) for item in node.items):
                yield None
        elif isinstance(node, ast.arg) and matches(ast.Name(id=node.arg)):
            yield None


def _first_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name of a method's first parameter (``self``)."""
    arguments = function.args.posonlyargs + function.args.args
    return arguments[0].arg if arguments else None


def _qualified(func: ast.expr, imports: ImportMap) -> str | None:
    dotted = ast_dotted_name(func)
    return None if dotted is None else imports.resolve(dotted)


def _true(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True
