"""AGL151: keyword-only forward parameters graph-break under torch.compile."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.model.spec import ParamKind
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


class KeywordOnlyForwardGraphBreak(Rule):
    """Reports keyword-only parameters in a Function's ``forward`` (compile compatibility
    family: off unless selected or ``uses-compile = true``).  Dynamo breaks the graph at an
    ``apply`` that passes them (by keyword, the only way); one that leaves them to their
    defaults is traced."""

    code = "AGL151"
    title = "keyword-only forward parameters graph-break under torch.compile"
    severity = Severity.INFO
    enabled_by_default = False
    on_when_compiling = True
    why = (
        "Measured with `fullgraph=True` on torch 2.13: `Unsupported: autograd_function_kwonly_args. Explanation: "
        "autograd.Function.apply does not support keyword-only arguments in forward().` "
        "([GB4372](https://meta-pytorch.github.io/compile-graph-break-site/gb/gb4372.html))"
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        forward = ctx.function.methods.get("forward")
        if forward is None:
            return
        params = [p for p in forward.params if p.kind is ParamKind.KEYWORD_ONLY]
        if params:
            which = "every apply" if any(p.default is None for p in params) else "every apply that passes one"
            yield Report(
                forward.position,
                f"{ctx.function.name}.forward has keyword-only parameters ({', '.join(p.name for p in params)}): "
                f"torch.compile graph-breaks at {which} (GB4372; an error under fullgraph=True)",
            )

    VALID = [
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale=2.0):
                    ctx.scale = scale
                    return x * scale

                @staticmethod
                def backward(ctx, g):
                    return g * ctx.scale, None
            """
        ),
        Valid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return sum(xs)

                @staticmethod
                def backward(ctx, g):
                    return (g,) * ctx.n
            """
        ),
        Valid(
            """
            import torch

            class Helper:
                @staticmethod
                def forward(ctx, x, *, scale=2.0):
                    return x * scale
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class KwOnly(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, *, scale=2.0):
                    return x * scale

                @staticmethod
                def backward(ctx, g):
                    return g * 2
            """,
            line=5,
            message="(scale)",
        ),
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(x, *, scale, shift=0.0):
                    return x * scale + shift

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, g):
                    return g
            """,
            line=5,
            message="(scale, shift)",
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Clip(Function):
                @staticmethod
                def forward(ctx, x, *args, limit=1.0):
                    return x.clamp(-limit, limit)

                @staticmethod
                def backward(ctx, g):
                    return g
            """,
            line=5,
            message="GB4372",
        ),
    ]
