"""AGL153: a classmethod forward or backward graph-breaks under torch.compile; a classmethod
setup_context makes it raise."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


class ClassmethodGraphBreak(Rule):
    """Reports ``forward``, ``setup_context`` or ``backward`` declared ``@classmethod`` in an
    ``autograd.Function`` (compile compatibility family: off unless selected or
    ``uses-compile = true``).  Eager, gradcheck and ``torch.func`` work with them."""

    code = "AGL153"
    title = "classmethod forward/backward/setup_context breaks torch.compile"
    severity = Severity.INFO
    enabled_by_default = False
    on_when_compiling = True
    why = (
        "Measured on torch 2.13 (bench/recreate/issue23_messages.py, torch.compile's default inductor backend): "
        "eager, gradcheck and torch.func work. A classmethod `forward` or `backward`: torch.compile graph-breaks "
        "at every `apply`, and `fullgraph=True` raises `torch._dynamo.exc.Unsupported: failed to bind arguments "
        "when attempting to inline`. A classmethod `setup_context` is worse: torch.compile raises even without "
        "`fullgraph` (`AssertionError: Guard failed on the same frame it was created. This is a bug`), so that "
        "case is an error."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        for name in ("forward", "setup_context", "backward"):
            method = ctx.function.methods.get(name)
            if method is None or not method.is_classmethod:
                continue
            if name == "setup_context":
                yield Report(
                    method.position,
                    f"{ctx.function.name}.setup_context is a classmethod: torch.compile raises at the apply "
                    "(`AssertionError: Guard failed on the same frame it was created`), even without "
                    "fullgraph; make it a staticmethod",
                    Severity.ERROR,
                )
                continue
            yield Report(
                method.position,
                f"{ctx.function.name}.{name} is a classmethod: torch.compile graph-breaks at every apply "
                "(fullgraph=True raises `Unsupported: failed to bind arguments`); make it a staticmethod",
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
            message="Double.forward is a classmethod: torch.compile graph-breaks at every apply "
            "(fullgraph=True raises `Unsupported: failed to bind arguments`)",
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
            message="Split.setup_context is a classmethod: torch.compile raises at the apply",
        ),
    ]
