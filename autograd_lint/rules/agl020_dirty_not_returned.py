"""AGL020: ``ctx.mark_dirty`` on a tensor that forward does not return."""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from autograd_lint.model.exprs import ctx_attribute
from autograd_lint.model.flow import child_bodies, method_body
from autograd_lint.model.semantic import Binding, MethodModel
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)

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


def _may_be(
    semantic: MethodModel, node: cst.BaseExpression, marked: frozenset[Binding], holders: frozenset[Binding], whole: bool
) -> bool:
    """Whether the returned expression ``node`` may be the tensor that the ``marked``
    bindings hold (``holders``: the bindings that may hold it, or a container with it).
    ``whole``: ``node`` is the entire return value, not an element of a tuple literal."""
    if isinstance(node, cst.Name):
        return bool(semantic.reaching(node) & holders)
    if isinstance(node, cst.BinaryOperation):
        # Arithmetic makes a new tensor; only tuple joins can pass the tensor through,
        # and an operand that is the marked tensor itself makes it arithmetic.
        operands = (node.left, node.right)
        if not whole or not isinstance(node.operator, _SEQUENCE_OPERATORS):
            return False
        if any(isinstance(o, cst.Name) and semantic.reaching(o) & marked for o in operands):
            return False
    elif isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Plus):
        return False  # `+x is x` for a tensor; `-x`, `~x` and `not x` are new objects
    elif (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _FRESH_METHODS
    ):
        return False
    return any(binding in holders for binding in semantic.dependencies(node))


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
        semantic = forward.semantic
        if semantic is None:
            return
        reports: list[Report] = []
        # A marked name -> the mark_dirty call, the bindings marked there, and what may hold them.
        Marked = dict[str, tuple[cst.Call, frozenset[Binding], frozenset[Binding]]]

        def check(ret: cst.Return, marked: Marked) -> None:
            value = ret.value
            if isinstance(value, cst.Tuple):
                elements = [e.value for e in value.elements]
                if any(isinstance(e, cst.StarredElement) for e in value.elements):
                    return
                whole = False
            else:
                elements = [] if value is None else [value]
                whole = True
            for name, (call, bindings, holders) in marked.items():
                if not any(_may_be(semantic, e, bindings, holders, whole) for e in elements):
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

        def walk(statements: Sequence[cst.BaseStatement], marked: Marked) -> None:
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
                                bindings = semantic.reaching(arg.value)
                                if bindings:  # a name the body does not bind: where it goes is unknown
                                    marked[arg.value.value] = (call, bindings, semantic.holders(bindings))
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
        # A second name for the input is marked; the input is returned (the same tensor).
        Valid(
            """
            import torch

            class AddOne(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = x
                    ctx.mark_dirty(out)
                    out.add_(1)
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad
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
        # A torch call that writes the marked tensor does not make every later torch
        # expression return it.
        Invalid(
            """
            import torch

            class Fill(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.mark_dirty(x)
                    torch.mul(x, 0, out=x)
                    return torch.ones(1)

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=8,
            message="Fill.forward marks `x` dirty (line 6) but this return does not return `x`",
        ),
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
            message="marks `x` dirty (line 6) but this return does not return `x`",
        ),
    ]
