"""AGL150: an autograd.Function that defines jvp or vjp graph-breaks under torch.compile."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

_GRAPH_BREAKS = {
    "jvp": ("GB0144", "Unsupported custom jvp"),
    "vjp": ("GB0145", "Unsupported custom vjp"),
}


class CustomJvpOrVjpGraphBreak(Rule):
    """Reports a ``jvp`` or ``vjp`` method written in an ``autograd.Function`` (compile
    compatibility family: off unless selected or ``uses-compile = true``).  Dynamo does
    not trace such a class when an input requires grad (``torch/_dynamo/variables/misc.py``):
    every such ``apply`` is a graph break, even when the method is never used."""

    code = "AGL150"
    title = "Function with jvp or vjp graph-breaks under torch.compile"
    severity = Severity.INFO
    enabled_by_default = False
    on_when_compiling = True
    why = (
        "Measured with `fullgraph=True` on torch 2.13: `Unsupported: Unsupported custom jvp. Explanation: Dynamo "
        "does not support tracing autograd.Function subclasses that define a custom jvp method.` "
        "([GB0144](https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0144.html); a `vjp` is "
        "[GB0145](https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0145.html)). Without "
        "`fullgraph` the graph breaks at every call."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        for name, (graph_break, text) in _GRAPH_BREAKS.items():
            method = ctx.function.methods.get(name)
            if method is not None:
                yield Report(
                    method.position,
                    f"{ctx.function.name} defines {name}: torch.compile graph-breaks at every apply with an "
                    f"input that requires grad ({graph_break} '{text}'; an error under fullgraph=True)",
                )

    VALID = [
        Valid(
            """
            import torch

            class Sin(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.sin()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0])

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return g * x.cos()
            """
        ),
        Valid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """
        ),
        Valid(
            """
            import torch

            class NotAFunction:
                @staticmethod
                def jvp(ctx, t):
                    return t
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class WithJvp(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.sin()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0])
                    ctx.save_for_forward(inputs[0])

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return g * x.cos()

                @staticmethod
                def jvp(ctx, t):
                    (x,) = ctx.saved_tensors
                    return t * x.cos()
            """,
            line=19,
            message="GB0144",
        ),
        Invalid(
            """
            import torch

            class WithVjp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def vjp(ctx, g):
                    return g * 2
            """,
            line=9,
            message="GB0145",
        ),
        Invalid(
            """
            import torch

            class Unused(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2

                @staticmethod
                def jvp(ctx, t):
                    return t * 2
            """,
            line=13,
            message="defines jvp",
        ),
    ]
