"""AGL016: backward returns a list or another non-tuple container."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.rules._common import short
from autograd_lint.rules.base import FixSafety, Fixer, FunctionContext, Invalid, Report, Rule, Severity, Valid

# Return shapes (see autograd_lint.model.spec.Return.shape) that are a container but not a tuple.
_CONTAINERS = {
    "list": "a list",
    "listcomp": "a list comprehension",
    "genexp": "a generator expression",
    "dict": "a dict",
    "set": "a set",
    "call:list": "a list",
}


class _Fix(Fixer):
    """Makes a reported list return a tuple: ``[a, b]`` gives ``(a, b)`` (``[a]`` gives
    ``(a,)``), a list comprehension or a generator expression gives ``tuple(...)`` of
    the same generator, and ``list(...)`` gives ``tuple(...)``.  Dicts and sets are
    left alone: which gradient is which can't be told from them."""

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        value = updated_node.value
        if value is None or not self.reported(original_node):
            return updated_node
        if isinstance(value, cst.List):
            elements = list(value.elements)
            if len(elements) == 1 and isinstance(elements[0].comma, cst.MaybeSentinel):
                elements[0] = elements[0].with_changes(comma=cst.Comma())
            gradients: cst.BaseExpression = cst.Tuple(
                elements,
                lpar=[*value.lpar, cst.LeftParen(whitespace_after=value.lbracket.whitespace_after)],
                rpar=[cst.RightParen(whitespace_before=value.rbracket.whitespace_before), *value.rpar],
            )
        elif isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            # A generator that is a call's only argument needs no parentheses of its own.
            generator = cst.GeneratorExp(value.elt, value.for_in, lpar=[], rpar=[])
            # A generator expression's parentheses are its own; a list comprehension's wrap it.
            outer = ([], []) if isinstance(value, cst.GeneratorExp) else (value.lpar, value.rpar)
            gradients = cst.Call(cst.Name("tuple"), [cst.Arg(generator)], lpar=outer[0], rpar=outer[1])
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list":
            gradients = value.with_changes(func=cst.Name("tuple"))
        else:
            return updated_node
        return updated_node.with_changes(value=gradients)


class ContainerReturn(Rule):
    """Reports a ``return`` in ``backward`` (or ``vjp``) whose value is a list literal, a
    list comprehension, a generator expression, a dict or set literal or comprehension,
    or a ``list(...)`` call.  PyTorch takes such a value as one gradient, not as one per
    input; gradients must be returned as a tuple (or a single tensor)."""

    code = "AGL016"
    title = "backward returns a list or another non-tuple container"
    severity = Severity.ERROR
    fix = FixSafety.SAFE
    fixer = _Fix
    why = (
        "The container is taken as a single gradient. With two or more inputs: "
        "`RuntimeError: function FBackward returned an incorrect number of gradients "
        "(expected 2, got 1)`; with one input: `RuntimeError: expected Variable or None "
        "(got list)`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        for name in ("backward", "vjp"):
            method = ctx.function.methods.get(name)
            if method is None:
                continue
            for ret in method.returns:
                what = _CONTAINERS.get(ret.shape)
                if what is None or ret.value is None:
                    continue
                yield Report(
                    ret.position,
                    f"{ctx.function.name}.{name} returns {what} (`{short(ret.value.text, 50)}`); "
                    "return the gradients as a tuple",
                )

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """
        ),
        # Trap 2: a tuple built from a list or a generator is fine.
        Valid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return sum(xs)

                @staticmethod
                def backward(ctx, grad):
                    grads = [grad for _ in range(ctx.n)]
                    return tuple(grads)

            class Stack(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return torch.stack(xs)

                @staticmethod
                def backward(ctx, grad):
                    return tuple(g for g in grad.unbind(0))
            """
        ),
        # A list built inside backward for other uses, and lists returned by nested helpers.
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    def parts():
                        return [grad]

                    pieces = parts()
                    return pieces[0]
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return [grad * b, grad * a]
            """,
            line=12,
            message="Mul.backward returns a list (`[grad * b, grad * a]`)",
            fixed="""
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return (grad * b, grad * a)
            """,
        ),
        Invalid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return sum(xs)

                @staticmethod
                def backward(ctx, grad):
                    return [grad for _ in range(ctx.n)]
            """,
            line=11,
            message="returns a list comprehension",
            fixed="""
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return sum(xs)

                @staticmethod
                def backward(ctx, grad):
                    return tuple(grad for _ in range(ctx.n))
            """,
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Sum(Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return sum(xs)

                @staticmethod
                def vjp(ctx, grad):
                    return (grad for _ in range(ctx.n))
            """,
            line=11,
            message="Sum.vjp returns a generator expression",
            fixed="""
            from torch.autograd import Function

            class Sum(Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return sum(xs)

                @staticmethod
                def vjp(ctx, grad):
                    return tuple(grad for _ in range(ctx.n))
            """,
        ),
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    return a + b

                @staticmethod
                def backward(ctx, grad):
                    if grad.is_sparse:
                        return list((grad, grad))
                    return {"a": grad, "b": grad}
            """,
            line=11,
            message="returns a list (`list((grad, grad))`)",
            fixed="""
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    return a + b

                @staticmethod
                def backward(ctx, grad):
                    if grad.is_sparse:
                        return tuple((grad, grad))
                    return {"a": grad, "b": grad}
            """,
        ),
        # One gradient in a list: the fix gives a one-element tuple and keeps the comment.
        Invalid(
            """
            import torch

            class Neg(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return -x

                @staticmethod
                def backward(ctx, grad):
                    return [-grad]  # d(-x)/dx
            """,
            line=10,
            message="Neg.backward returns a list",
            fixed="""
            import torch

            class Neg(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return -x

                @staticmethod
                def backward(ctx, grad):
                    return (-grad,)  # d(-x)/dx
            """,
        ),
    ]

