"""AGL112: a fake kernel takes another number of positional arguments than its op."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.rules._common import plural
from autograd_lint.rules._custom_ops import registrations
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class FakeArity(Rule):
    """Reports a fake kernel (``register_fake``) that cannot take every positional argument
    the op can be called with, or that requires more than the op has.  A fake kernel
    should take exactly the op's parameters."""

    code = "AGL112"
    title = "fake kernel takes a different number of arguments than the op"
    severity = Severity.ERROR
    why = (
        "The fake kernel is called with the arguments the op was called with, under torch.compile and "
        "export: `Unsupported: TypeError when making fake tensor call ... _() takes 1 positional argument but "
        "2 were given`. Eager calls work, so the mismatch shows only when compiling."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op, registration in registrations(analysis, "fake"):
            fake = registration.function
            if fake is None or fake.node is None or any(p.kind.value == "*args" for p in op.params):
                continue
            params = fake.node.params
            if isinstance(params.star_arg, cst.Param):
                continue
            positional = [*params.posonly_params, *params.params]
            required = sum(1 for p in positional if p.default is None)
            op_count = len(op.positional)
            op_required = sum(1 for p in op.positional if p.default is None)
            if len(positional) < op_count:
                problem = f"takes {plural(len(positional), 'positional argument')}"
                when = "on every compiled call" if len(positional) < op_required else (
                    "when a caller passes " + ", ".join(f"`{p.name}`" for p in op.positional[len(positional):])
                )
            elif required > op_count:
                problem = f"requires {plural(required, 'positional argument')}"
                when = "on every compiled call"
            else:
                continue
            yield Report(
                fake.position,
                f"fake kernel `{fake.name}` of {op.display} {problem} but the op has "
                f"{plural(op_count, 'positional parameter')} ({', '.join(p.name for p in op.positional)}): "
                f"TypeError under torch.compile {when}",
            )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, s: float) -> Tensor:
                return x * s

            @scale.register_fake
            def _(x, s):
                return torch.empty_like(x)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, s: float = 1.0) -> Tensor:
                return x * s

            @scale.register_fake
            def _(*args):
                return torch.empty_like(args[0])
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, *, s: float = 1.0) -> Tensor:
                return x * s

            torch.library.register_fake("demo::scale", lambda x, *, s=1.0: torch.empty_like(x))
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, s: float) -> Tensor:
                return x * s

            @scale.register_fake
            def _(x):
                return torch.empty_like(x)
            """,
            line=9,
            message="on every compiled call",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, s: float = 1.0, shift: float = 0.0) -> Tensor:
                return x * s + shift

            @torch.library.register_fake("demo::scale")
            def _(x, s=1.0):
                return torch.empty_like(x)
            """,
            line=9,
            message="when a caller passes `shift`",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor) -> Tensor:
                return x * 2

            @scale.register_fake
            def _(x, s):
                return torch.empty_like(x)
            """,
            line=9,
            message="requires 2 positional arguments",
        ),
    ]
