"""AGL029: a forward-only ctx API is called in backward, vjp or jvp."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

# The ctx APIs that only take effect in forward or setup_context.
FORWARD_ONLY_APIS = (
    "save_for_backward",
    "save_for_forward",
    "mark_dirty",
    "mark_non_differentiable",
    "set_materialize_grads",
)


class ForwardOnlyCtxApi(Rule):
    """Reports a call to ``ctx.save_for_backward``, ``save_for_forward``, ``mark_dirty``,
    ``mark_non_differentiable`` or ``set_materialize_grads`` in ``backward``, ``vjp`` or
    ``jvp``.  ctx is the method's first positional parameter, whatever its name.  These
    APIs are read by the engine only after forward/setup_context returns, so a call
    made later has no effect."""

    code = "AGL029"
    title = "forward-only ctx API called in backward/jvp"
    severity = Severity.WARNING
    why = (
        "The call silently does nothing: no error, and no change in gradients (verified for "
        "`set_materialize_grads(False)`, `save_for_backward` and `mark_non_differentiable` "
        "called inside backward). The docs say these APIs should be called only from "
        "forward() or setup_context()."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        for name in ("backward", "vjp", "jvp"):
            method = ctx.function.methods.get(name)
            if method is None or not ctx.own(method):
                continue
            for call in method.ctx_calls:
                if call.api in FORWARD_ONLY_APIS:
                    yield Report(
                        call.position,
                        f"{ctx.function.name}.{name} calls ctx.{call.api}(), which has no "
                        "effect outside forward/setup_context",
                    )

    VALID = [
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(False)
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return None if grad is None else grad * y
            """
        ),
        # Trap 5: split style; the save happens in setup_context, inherited by the subclass.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.sin()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0])
                    ctx.save_for_forward(inputs[0])

            class Sin(Base):
                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * x.cos()

                @staticmethod
                def jvp(ctx, tangent):
                    (x,) = ctx.saved_tensors
                    return tangent * x.cos()
            """
        ),
        # Trap 3 and 8: *grad_outputs; a Function applied inside backward saves on its own ctx.
        Valid(
            """
            import torch
            from torch.autograd.function import once_differentiable

            class Inner(torch.autograd.Function):
                @staticmethod
                def forward(ctx, g):
                    ctx.mark_non_differentiable(g)
                    return g

                @staticmethod
                def backward(ctx, gg):
                    return gg

            class Outer(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                @once_differentiable
                def backward(ctx, *grads):
                    return Inner.apply(grads[0])
            """
        ),
        # Trap 9: ctx found by position; `self.saved_tensors` is a read, not a forward-only call.
        Valid(
            """
            import torch

            class Old(torch.autograd.Function):
                @staticmethod
                def forward(self, x):
                    self.save_for_backward(x)
                    return x * 2

                @staticmethod
                def backward(self, grad):
                    (x,) = self.saved_tensors
                    return grad * 2
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    ctx.set_materialize_grads(False)
                    (y,) = ctx.saved_tensors
                    return grad * y
            """,
            line=12,
            message="Exp.backward calls ctx.set_materialize_grads(), which has no effect",
        ),
        # ctx is the first parameter, whatever its name.
        Invalid(
            """
            from torch.autograd import Function

            class Square(Function):
                @staticmethod
                def forward(self, x):
                    return x * x

                @staticmethod
                def backward(self, grad):
                    self.save_for_backward(grad)
                    return grad * 2
            """,
            line=10,
            message="Square.backward calls ctx.save_for_backward()",
        ),
        Invalid(
            """
            import torch

            class Sin(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.sin()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.x = inputs[0]

                @staticmethod
                def jvp(ctx, tangent):
                    out = tangent * ctx.x.cos()
                    ctx.mark_non_differentiable(out)
                    return out
            """,
            line=15,
            message="Sin.jvp calls ctx.mark_non_differentiable()",
        ),
    ]
