"""AGL108: a custom op declares a Tensor parameter keyword-only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from autograd_lint.rules._custom_ops import is_tensor_like_annotation, own_ops
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


class KeywordOnlyTensor(Rule):
    """Reports a keyword-only parameter (after ``*``) annotated ``Tensor``,
    ``Optional[Tensor]`` or a list of Tensors in a ``custom_op`` function whose schema is
    inferred."""

    code = "AGL108"
    title = "custom op has a keyword-only Tensor parameter"
    severity = Severity.ERROR
    why = (
        "Custom ops do not support them; the decorator fails at import: `NotImplementedError: custom_op with "
        "kwarg-only Tensor args. Please make your tensors not kwarg-only. Got: kwt(Tensor x, *, Tensor w) -> "
        "Tensor`."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op in own_ops(analysis):
            if op.has_schema:
                continue
            for param in op.keyword_only:
                if is_tensor_like_annotation(param.annotation):
                    yield Report(
                        op.body.position if op.body else op.position,
                        f"{op.display} declares Tensor parameter `{param.name}: {param.annotation}` keyword-only: "
                        "NotImplementedError at import; move it before the `*`",
                    )

    VALID = [
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, w: Tensor, *, scale: float = 1.0) -> Tensor:
                return x * w * scale
            """
        ),
        Valid(
            """
            import torch
            from typing import Optional
            from torch import Tensor

            @torch.library.custom_op("demo::bias", mutates_args=())
            def bias(x: Tensor, b: Optional[Tensor] = None) -> Tensor:
                return x.clone() if b is None else x + b
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=(), schema="(Tensor x, *, Tensor w) -> Tensor")
            def mul(x: Tensor, *, w: Tensor) -> Tensor:
                return x * w
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, *, w: Tensor) -> Tensor:
                return x * w
            """,
            line=5,
            message="`w: Tensor`",
        ),
        Invalid(
            """
            import torch
            from typing import Optional
            from torch import Tensor

            @torch.library.custom_op("demo::bias", mutates_args=())
            def bias(x: Tensor, *, b: Optional[Tensor] = None) -> Tensor:
                return x.clone() if b is None else x + b
            """,
            line=6,
            message="Optional[Tensor]",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::stack_add", mutates_args=())
            def stack_add(x: Tensor, *, others: list[Tensor]) -> Tensor:
                return x + sum(others)
            """,
            line=5,
            message="list[Tensor]",
        ),
    ]
