"""AGL016: backward returns a list or another non-tuple container."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# Return shapes (see autograd_lint.spec.Return.shape) that are a container but not a tuple.
_CONTAINERS = {
    "list": "a list",
    "listcomp": "a list comprehension",
    "genexp": "a generator expression",
    "dict": "a dict",
    "set": "a set",
    "call:list": "a list",
}


class ContainerReturn(Rule):
    """Reports a ``return`` in ``backward`` (or ``vjp``) whose value is a list literal, a
    list comprehension, a generator expression, a dict or set literal or comprehension,
    or a ``list(...)`` call.  PyTorch takes such a value as one gradient, not as one per
    input; gradients must be returned as a tuple (or a single tensor)."""

    code = "AGL016"
    title = "backward returns a list or another non-tuple container"
    severity = Severity.ERROR
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
                    f"{ctx.function.name}.{name} returns {what} (`{_short(ret.value.text)}`); "
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
        ),
    ]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 50 else text[:47] + "..."
