"""AGL109: a custom op's schema cannot be inferred (missing annotations, ``*args``, no return annotation)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from autograd_lint.model.spec import ParamKind
from autograd_lint.rules._custom_ops import own_ops
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class SchemaNotInferable(Rule):
    """Reports a ``custom_op`` function without ``schema=`` that has a parameter without a
    type annotation, a ``*args`` or ``**kwargs`` parameter, or no return annotation.
    (Annotations of unsupported types are not reported: an alias can't be told from its
    name.)"""

    code = "AGL109"
    title = "custom op schema cannot be inferred"
    severity = Severity.ERROR
    why = (
        "`infer_schema` reads the annotations when the decorator runs, at import: `ValueError: "
        "infer_schema(func): Parameter x must have a type annotation. Got func with signature (x, y: float) "
        "-> torch.Tensor)`; `*args` and a missing return annotation fail the same way."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op in own_ops(analysis):
            if op.has_schema or op.body is None:
                continue
            problems = []
            for param in op.params:
                if param.kind in (ParamKind.VAR_POSITIONAL, ParamKind.VAR_KEYWORD):
                    star = "*" if param.kind is ParamKind.VAR_POSITIONAL else "**"
                    problems.append(f"`{star}{param.name}` is not supported")
                elif param.annotation is None:
                    problems.append(f"parameter `{param.name}` has no type annotation")
            if op.return_annotation is None:
                problems.append("there is no return annotation")
            if problems:
                yield Report(
                    op.body.position,
                    f"schema of {op.display} can't be inferred: {'; '.join(problems)}: ValueError at import",
                )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y
            """
        ),
        Valid(
            """
            import torch

            @torch.library.custom_op("demo::mul", mutates_args=(), schema="(Tensor x, float y) -> Tensor")
            def mul(x, y):
                return x * y
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=("out",))
            def sin_out(x: Tensor, out: Tensor) -> None:
                out.copy_(x.sin())
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x, y: float) -> Tensor:
                return x * y
            """,
            line=5,
            message="parameter `x` has no type annotation",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::total", mutates_args=())
            def total(*xs: Tensor) -> Tensor:
                return sum(xs)
            """,
            line=5,
            message="`*xs` is not supported",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::sin_out", mutates_args=("out",))
            def sin_out(x: Tensor, out: Tensor):
                out.copy_(x.sin())
            """,
            line=5,
            message="no return annotation",
        ),
    ]
