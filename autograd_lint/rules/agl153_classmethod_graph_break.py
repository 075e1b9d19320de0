"""AGL153: a classmethod forward or backward graph-breaks under torch.compile."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


class ClassmethodGraphBreak(Rule):
    """Reports ``forward``, ``setup_context`` or ``backward`` declared ``@classmethod`` in an
    ``autograd.Function`` (compile compatibility family: off unless selected or
    ``uses-compile = true``).  Eager, gradcheck and ``torch.func`` work with them."""

    code = "AGL153"
    title = "classmethod forward/backward graph-breaks under torch.compile"
    severity = Severity.INFO
    enabled_by_default = False
    on_when_compiling = True
    why = (
        "Measured on torch 2.13: eager, gradcheck and torch.func work, but torch.compile graph-breaks at every "
        "`apply` of a Function whose forward or backward is a classmethod, and `fullgraph=True` fails."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        for name in ("forward", "setup_context", "backward"):
            method = ctx.function.methods.get(name)
            if method is not None and method.is_classmethod:
                yield Report(
                    method.position,
                    f"{ctx.function.name}.{name} is a classmethod: torch.compile graph-breaks at every apply (an "
                    "error under fullgraph=True); make it a staticmethod",
                )

    VALID = [
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

            class Double(torch.autograd.Function):
                @classmethod
                def make(cls, x):
                    return cls.apply(x)

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

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 2

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Double(torch.autograd.Function):
                @classmethod
                def forward(cls, ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """,
            line=5,
            message="Double.forward is a classmethod",
        ),
        Invalid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @classmethod
                def backward(cls, ctx, g):
                    return g * 2
            """,
            line=9,
            message="Double.backward",
        ),
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 2

                @classmethod
                def setup_context(cls, ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """,
            line=9,
            message="setup_context is a classmethod",
        ),
    ]
