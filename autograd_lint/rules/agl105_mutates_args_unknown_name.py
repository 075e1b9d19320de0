"""AGL105: ``mutates_args`` names something that is not a parameter of the op."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from autograd_lint.rules._custom_ops import own_ops
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class MutatesArgsUnknownName(Rule):
    """Reports a name in a literal ``mutates_args`` that is not a parameter of the
    decorated function (a typo, or a parameter renamed later)."""

    code = "AGL105"
    title = "mutates_args names something that is not a parameter"
    severity = Severity.ERROR
    why = (
        "Schema inference fails when the module is imported: `ValueError: infer_schema(func): {'outt'} in "
        "mutates_args were not found in the custom op's signature.`"
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op in own_ops(analysis):
            if not isinstance(op.mutates_args, tuple) or op.has_schema or op.body is None:
                continue
            names = {p.name for p in op.params}
            for name in op.mutates_args:
                if name not in names:
                    yield Report(
                        op.mutates_position or op.position,
                        f"mutates_args of {op.display} names \"{name}\", which is not a parameter of "
                        f"`{op.python_name}({', '.join(p.name for p in op.params)})`: ValueError at import",
                    )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=("out",))
            def sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::fill", mutates_args="unknown")
            def fill(x: Tensor, value: float) -> None:
                x.fill_(value)
            """
        ),
        Valid(
            """
            from torch import Tensor
            from torch.library import custom_op

            def _sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())

            sin_out = custom_op("demo::sin_out", _sin_out, mutates_args={"out"})
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=("outt",))
            def sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())
            """,
            line=4,
            message='names "outt"',
        ),
        Invalid(
            """
            from torch import Tensor
            from torch.library import custom_op

            def _sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())

            sin_out = custom_op("demo::sin_out", _sin_out, mutates_args=["x", "result"])
            """,
            line=7,
            message='"result"',
        ),
        Invalid(
            """
            import torch.library as L
            from torch import Tensor

            @L.custom_op("demo::scale_", mutates_args=("self",))
            def scale_(x: Tensor, factor: float) -> None:
                x.mul_(factor)
            """,
            line=4,
            message='"self"',
        ),
    ]
