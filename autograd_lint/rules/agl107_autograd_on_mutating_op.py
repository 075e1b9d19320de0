"""AGL107: ``register_autograd`` on an op that mutates its arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from autograd_lint.rules._custom_ops import registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class AutogradOnMutatingOp(Rule):
    """Reports ``register_autograd`` (method or ``torch.library.register_autograd``) on an op
    whose ``mutates_args`` names a parameter or is ``"unknown"``."""

    code = "AGL107"
    title = "register_autograd on an op that mutates its arguments"
    severity = Severity.ERROR
    why = (
        "Only functional ops can have an autograd formula; the registration fails when it runs: "
        "`RuntimeError: Cannot register autograd formula for non-functional operator <CustomOpDef(ns::op)> "
        "with schema ns::op(Tensor(a0!) x) -> (). Please create a functional operator and register an "
        "autograd formula for that.`"
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op, registration in registrations(analysis, "autograd"):
            if op.is_functional is False:
                shown = '"unknown"' if op.mutates_args == "unknown" else ", ".join(op.mutates_args or ())
                yield Report(
                    registration.position,
                    f"register_autograd on {op.display}, which mutates {shown}: RuntimeError 'Cannot register "
                    "autograd formula for non-functional operator' when this line runs",
                )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=())
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            sin.register_autograd(lambda ctx, g: g)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=("out",))
            def sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())

            @sin_out.register_fake
            def _(x, out):
                return None
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin", mutates_args=[])
            def sin(x: Tensor) -> Tensor:
                return x.sin()

            torch.library.register_autograd("demo::sin", lambda ctx, g: g)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::add_one_", mutates_args=("x",))
            def add_one_(x: Tensor) -> None:
                x.add_(1)

            add_one_.register_autograd(lambda ctx, g: g)
            """,
            line=8,
            message="which mutates x",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::fill_", mutates_args="unknown")
            def fill_(x: Tensor, value: float) -> Tensor:
                return x.clone().fill_(value)

            torch.library.register_autograd("demo::fill_", lambda ctx, g: (None, None))
            """,
            line=8,
            message='"unknown"',
        ),
        Invalid(
            """
            from torch import Tensor
            from torch.library import custom_op, register_autograd

            @custom_op("demo::scale_", mutates_args={"x"})
            def scale_(x: Tensor, factor: float) -> None:
                x.mul_(factor)

            register_autograd(scale_, lambda ctx, g: (g, None))
            """,
            line=8,
            message="register_autograd on demo::scale_, which mutates x",
        ),
    ]
