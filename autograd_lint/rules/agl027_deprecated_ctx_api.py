"""AGL027: a deprecated ctx API (``ctx.saved_variables``, ``ctx.mark_shared_storage``)."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.spec import CTX_METHODS


class DeprecatedCtxApi(Rule):
    """Reports loads of ``ctx.saved_variables`` (use ``ctx.saved_tensors``) and calls to
    ``ctx.mark_shared_storage(...)`` (delete them: shared storage is tracked
    automatically).  ctx is the first positional parameter, whatever its name, of
    ``setup_context``, ``backward``, ``vjp``, ``jvp``, and of ``forward`` when the class
    does not override ``setup_context``."""

    code = "AGL027"
    title = "Deprecated ctx API"
    severity = Severity.WARNING
    why = (
        "`DeprecationWarning: 'saved_variables' is deprecated; use 'saved_tensors'`; "
        "``FutureWarning: `mark_shared_storage` is deprecated. Tensors with shared storages "
        "are automatically tracked. Note that calls to `set_()` are not tracked``."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for name, method in function.methods.items():
            has_ctx = name in CTX_METHODS or (name == "forward" and function.is_split_style is False)
            if not has_ctx:
                continue
            for read in method.reads("saved_variables"):
                yield Report(
                    read.position,
                    f"{function.name}.{name} reads ctx.saved_variables, which is deprecated; "
                    "use ctx.saved_tensors",
                )
            for call in method.calls("mark_shared_storage"):
                yield Report(
                    call.position,
                    f"{function.name}.{name} calls ctx.mark_shared_storage(), which is "
                    "deprecated and does nothing (shared storage is tracked automatically); "
                    "delete the call",
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
        # Trap 9: ctx found by position; a same-named attribute of something else is not ctx.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(self, a, b):
                    self.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(self, grad, state=None):
                    a, b = self.saved_tensors
                    legacy = state.saved_variables if state is not None else None
                    return grad * b, grad * a
            """
        ),
        # Split style: forward's first parameter is an input, not ctx.
        Valid(
            """
            import torch

            class Take(torch.autograd.Function):
                @staticmethod
                def forward(record, index):
                    return record.saved_variables[index]

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return None, None
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
                    a, b = ctx.saved_variables
                    return grad * b, grad * a
            """,
            line=11,
            message="Mul.backward reads ctx.saved_variables, which is deprecated",
        ),
        Invalid(
            """
            from torch.autograd import Function

            class View(Function):
                @staticmethod
                def forward(self, x):
                    y = x.view(-1)
                    self.mark_shared_storage((x, y))
                    return y

                @staticmethod
                def backward(self, grad):
                    return grad
            """,
            line=7,
            message="View.forward calls ctx.mark_shared_storage()",
        ),
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x.exp()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(output)

                @staticmethod
                def jvp(ctx, tangent):
                    (y,) = ctx.saved_variables
                    return tangent * y
            """,
            line=14,
            message="Exp.jvp reads ctx.saved_variables",
        ),
    ]
