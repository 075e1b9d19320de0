"""AGL026: a Function defines both ``backward`` and ``vjp``."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import FunctionSpec, Position


def _definition(function: FunctionSpec, name: str) -> tuple[str, Position | None] | None:
    """Where the effective ``name`` comes from: the defining class and the position of
    its ``def`` or class-level assignment (``vjp = backward``), or None if nowhere."""
    for spec in function.mro():
        if name in spec.methods:
            return spec.qualname, spec.methods[name].position
        if name in spec.class_attributes:
            return spec.qualname, spec.class_attributes[name].position
    return None


class BackwardAndVjp(Rule):
    """Reports a Function whose effective class defines both ``backward`` and ``vjp``,
    as methods or as class attributes (``vjp = backward`` counts: PyTorch only checks
    that neither is the base class's).  The finding goes to the class that brings the
    second of the two, at its ``def`` or assignment, so an inherited conflict is
    reported once."""

    code = "AGL026"
    title = "both `backward` and `vjp` defined"
    severity = Severity.ERROR
    why = (
        "Backward fails: `RuntimeError: Implementing both 'backward' and 'vjp' for a custom "
        "Function is not allowed. You should only implement one of them.`"
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        backward = _definition(function, "backward")
        vjp = _definition(function, "vjp")
        if backward is None or vjp is None:
            return
        found = {"backward": backward, "vjp": vjp}
        own = [name for name, (owner, _) in found.items() if owner == function.qualname]
        if not own:
            return  # both inherited: reported on the class that brought them together
        position = found[own[-1]][1] or function.position
        inherited = [f", inherits {name} from {owner}" for name, (owner, _) in found.items() if name not in own]
        yield Report(
            position,
            f"{function.name} defines {' and '.join(own)}{''.join(inherited)}: a Function may "
            "implement only one of backward and vjp (vjp is its alias)",
        )

    VALID = [
        Valid(
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
                    (y,) = ctx.saved_tensors
                    return grad * y
            """
        ),
        # vjp alone (its alias), in split style as torch.func documents it.
        Valid(
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
                def vjp(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """
        ),
        # Trap 5: backward in the base, overridden (not aliased) in a subclass.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

            class Child(Base):
                @staticmethod
                def forward(ctx, x):
                    return x * 3

            class Grandchild(Child):
                @staticmethod
                def backward(ctx, grad):
                    return grad * 3
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
                    (y,) = ctx.saved_tensors
                    return grad * y

                @staticmethod
                def vjp(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """,
            line=16,
            message="Exp defines backward and vjp: a Function may implement only one",
        ),
        Invalid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

            class Child(Base):
                @staticmethod
                def vjp(ctx, grad):
                    return grad * 2
            """,
            line=14,
            message="Child defines vjp, inherits backward from Base",
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Alias(Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2

                vjp = backward
            """,
            line=12,
            message="Alias defines backward and vjp",
        ),
    ]
