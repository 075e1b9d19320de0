"""AGL020: ``ctx.mark_dirty`` on a tensor that forward does not return."""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import ctx_attribute
from autograd_lint.model.flow import child_bodies, method_body
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import MethodSpec

# Operators that can join or repeat tuples, so `(out,) + rest` may return the name.
_SEQUENCE_OPERATORS = (cst.Add, cst.Multiply, cst.Modulo)
# Tensor methods that never return their receiver (checked on torch 2.13: views and
# results are new tensors).  `contiguous`, `to`, `float`, `type_as`, `flatten` can.
_FRESH_METHODS = frozenset(
    """
    clone detach view view_as reshape reshape_as expand expand_as t transpose permute
    unsqueeze squeeze narrow select index_select masked_fill mul div add sub neg abs exp
    sqrt pow sum mean
    """.split()
)


def _mentioned(node: cst.CSTNode) -> set[str]:
    """Every name loaded or stored under ``node`` (nested lambdas included: they may
    close over the name)."""
    names: set[str] = set()

    class _Visitor(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            traverse.visit(node.value, self)
            return False  # `y.x` does not mention a name `x`

    traverse.visit(node, _Visitor())
    return names


def _root(target: cst.BaseExpression) -> set[str]:
    """The names a binding or a store into ``target`` can make hold a value."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Attribute, cst.Subscript)):
        return _root(target.value)
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_root(e.value) for e in target.elements)) if target.elements else set()
    if isinstance(target, cst.StarredElement):
        return _root(target.value)
    return set()


def _flows(method: MethodSpec) -> list[tuple[set[str], set[str]]]:
    """(targets, sources) for every way a value can reach a name in the method's body:
    assignments, loops, ``with ... as``, ``:=``, and method calls (``lst.append(x)``
    can put ``x`` in ``lst``)."""
    assert method.node is not None
    flows: list[tuple[set[str], set[str]]] = []

    class _Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is method.node

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                flows.append((_root(target.target), _mentioned(node.value)))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None:
                flows.append((_root(node.target), _mentioned(node.value)))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            flows.append((_root(node.target), _mentioned(node.value)))

        def visit_For(self, node: cst.For) -> None:
            flows.append((_root(node.target), _mentioned(node.iter)))

        def visit_WithItem(self, node: cst.WithItem) -> None:
            if node.asname is not None:
                flows.append((_root(node.asname.name), _mentioned(node.item)))

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            flows.append((_root(node.target), _mentioned(node.value)))

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute):
                arguments = set().union(*(_mentioned(a.value) for a in node.args)) if node.args else set()
                flows.append((_root(node.func.value), arguments))

    traverse.visit(method.node, _Visitor())
    return flows


def _may_hold(name: str, flows: list[tuple[set[str], set[str]]]) -> set[str]:
    """Names that may hold the tensor bound to ``name`` (or a container with it)."""
    holders = {name}
    changed = True
    while changed:
        changed = False
        for targets, sources in flows:
            if sources & holders and not targets <= holders:
                holders |= targets
                changed = True
    return holders


def _may_be(node: cst.BaseExpression, name: str, holders: set[str], whole: bool) -> bool:
    """Whether the returned expression ``node`` may be the tensor marked as ``name``.
    ``whole``: ``node`` is the entire return value, not an element of a tuple literal."""
    if isinstance(node, cst.Name):
        return node.value in holders
    if isinstance(node, cst.BinaryOperation):
        # Arithmetic makes a new tensor; only tuple joins can pass the name through,
        # and an operand that is the marked tensor itself makes it arithmetic.
        operands = (node.left, node.right)
        if not whole or not isinstance(node.operator, _SEQUENCE_OPERATORS):
            return False
        if any(isinstance(o, cst.Name) and o.value == name for o in operands):
            return False
        return bool(_mentioned(node) & holders)
    if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Plus):
        return False  # `+x is x` for a tensor; `-x`, `~x` and `not x` are new objects
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _FRESH_METHODS
    ):
        return False
    return bool(_mentioned(node) & holders)


class DirtyNotReturned(Rule):
    """Reports a ``return`` of forward (combined style) that follows a
    ``ctx.mark_dirty(x)`` call on every path to it (the call is earlier in the same
    block or an enclosing one) and certainly does not return ``x``: no returned
    element is ``x`` or a name that ``x`` may have flowed into (``out = x.add_(1)``,
    ``ctx.x = x``, ``lst.append(x)``).  Arithmetic, views and copies of ``x`` are new
    tensors, so ``return x * 1`` or ``return x.view(-1)`` does not return ``x``.  Returns on paths where mark_dirty is
    not called are not checked."""

    code = "AGL020"
    title = "mark_dirty on a tensor that forward does not return"
    severity = Severity.ERROR
    why = (
        "forward fails when the Function is applied: `RuntimeError: Some elements marked as "
        "dirty during the forward method were not returned as output. The inputs that are "
        "modified inplace must all be outputs of the Function.`"
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        forward = function.method("forward")
        if (
            forward is None
            or not ctx.own(forward)
            or forward.node is None
            or function.is_split_style is not False
            or not forward.calls("mark_dirty")
        ):
            return
        ctx_name = forward.ctx_name
        flows = _flows(forward)
        reports: list[Report] = []

        def check(ret: cst.Return, marked: dict[str, cst.Call]) -> None:
            value = ret.value
            if isinstance(value, cst.Tuple):
                elements = [e.value for e in value.elements]
                if any(isinstance(e, cst.StarredElement) for e in value.elements):
                    return
                whole = False
            else:
                elements = [] if value is None else [value]
                whole = True
            for name, call in marked.items():
                holders = _may_hold(name, flows)
                if not any(_may_be(e, name, holders, whole) for e in elements):
                    line = ctx.position(forward, call).line
                    reports.append(
                        Report(
                            ctx.position(forward, ret),
                            f"{function.name}.forward marks `{name}` dirty (line {line}) "
                            f"but this return does not return `{name}`",
                        )
                    )

        def mark_dirty_call(small: cst.BaseSmallStatement) -> cst.Call | None:
            if (
                isinstance(small, cst.Expr)
                and isinstance(small.value, cst.Call)
                and ctx_attribute(small.value.func, ctx_name) == "mark_dirty"
            ):
                return small.value
            return None

        def walk(statements: Sequence[cst.BaseStatement], marked: dict[str, cst.Call]) -> None:
            marked = dict(marked)
            for statement in statements:
                if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                    continue
                if not isinstance(statement, cst.SimpleStatementLine):
                    for body in child_bodies(statement):
                        walk(body, marked)
                    continue
                for small in statement.body:
                    call = mark_dirty_call(small)
                    if call is not None:
                        for arg in call.args:
                            if arg.star == "" and isinstance(arg.value, cst.Name):
                                marked[arg.value.value] = call
                    elif isinstance(small, cst.Return) and marked:
                        check(small, marked)

        walk(method_body(forward.node), {})
        yield from reports

    VALID = [
        Valid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.mark_dirty(x)
                    x.add_(1)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
        # Trap 4: a return on a path where mark_dirty is not called; an alias is returned.
        Valid(
            """
            import torch

            class MaybeInplace(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, inplace: bool):
                    if inplace:
                        ctx.mark_dirty(x)
                        out = x.mul_(2)
                        return out, x.sum()
                    return x * 2, x.sum()

                @staticmethod
                def backward(ctx, grad, grad_sum):
                    return grad * 2 + grad_sum, None
            """
        ),
        # Trap 2: tuple arithmetic and containers may carry the marked tensor.
        Valid(
            """
            import torch

            class Many(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    ctx.mark_dirty(x, y)
                    x.add_(1)
                    y.add_(1)
                    rest = []
                    rest.append(y)
                    return (x,) + tuple(rest)

                @staticmethod
                def backward(ctx, gx, gy):
                    return gx, gy
            """
        ),
        # Trap 5: split style marks names of setup_context, not of forward.
        Valid(
            """
            import torch

            class Exp_(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.exp_()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.mark_dirty(x)

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    x.add_(1)
                    ctx.mark_dirty(x)
                    return x * 1

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=8,
            message="AddOne.forward marks `x` dirty (line 7) but this return does not return `x`",
        ),
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    ctx.mark_dirty(x, y)
                    x.add_(1)
                    y.add_(1)
                    if x.sum() > 0:
                        return x, y
                    return x, y.clone()

                @staticmethod
                def backward(ctx, gx, gy):
                    return gx, gy
            """,
            line=11,
            message="marks `y` dirty",
        ),
        Invalid(
            """
            import torch

            class Zero(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.mark_dirty(x)
                    x.zero_()
                    with torch.no_grad():
                        return None

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=9,
        ),
    ]
