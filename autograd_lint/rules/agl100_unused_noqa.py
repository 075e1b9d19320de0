"""AGL100: a ``# noqa: AGL...`` comment that silences nothing (off by default, as ruff's RUF100)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from autograd_lint import noqa
from autograd_lint.model.spec import Position
from autograd_lint.rules import rule_by_code
from autograd_lint.rules.base import Diagnostic, Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# Codes of this tool; a noqa comment's other codes (E501, F401) belong to other linters.
_OWN_PREFIX = "AGL"
_FULL_CODE_LENGTH = len("AGL000")


class UnusedNoqa(Rule):
    """Reports a ``# noqa`` comment whose ``AGL`` codes include one that silences
    nothing on its line: no rule reports that code (or, for a prefix such as
    ``AGL0``, any code it starts) there, or the code is not a rule of
    autograd-lint.  Every rule is consulted, whether or not the run selects it,
    so the answer does not depend on the selection.  Codes of other linters
    (``E501``) and a bare ``# noqa`` are left alone, and only files that define
    a Function are looked at."""

    code = "AGL100"
    title = "`# noqa` code that silences nothing"
    severity = Severity.INFO
    enabled_by_default = False
    why = (
        "No error: the comment does nothing today, but it will silence that rule if a finding "
        "later appears on the line, hiding a real bug, and it tells readers that something is wrong "
        "here when nothing is."
    )

    reads_findings = True

    def check_findings(
        self, analysis: "FileAnalysis", settings: "Settings", findings: Callable[[], Sequence[Diagnostic]]
    ) -> Iterator[Report]:
        comments = [
            comment
            for comment in noqa.noqa_comments(analysis.source.text)
            if any(code.startswith(_OWN_PREFIX) for code in comment.codes)
        ]
        if not comments:
            return
        reported: dict[int, set[str]] = {}
        for diagnostic in findings():
            reported.setdefault(diagnostic.line, set()).add(diagnostic.code)
        for comment in comments:
            on_line = reported.get(comment.line, set())
            unused = []
            for listed in sorted(comment.codes):
                if not listed.startswith(_OWN_PREFIX) or listed == self.code:
                    continue
                if len(listed) == _FULL_CODE_LENGTH and rule_by_code(listed) is None:
                    unused.append(f"{listed} (not a rule)")
                elif not any(code.startswith(listed) for code in on_line):
                    unused.append(listed)
            if unused:
                yield Report(
                    Position(comment.line, comment.column),
                    f"`# noqa` lists {', '.join(unused)}, which silence{'s' if len(unused) == 1 else ''} "
                    "nothing on this line",
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
                    return grad * b  # noqa: AGL001
            """
        ),
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2  # noqa: E501

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2  # noqa
            """
        ),
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
                    return grad * b  # noqa: AGL0, E501
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
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a  # noqa: AGL001
            """,
            line=12,
            message="lists AGL001, which silences nothing",
        ),
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
                    a, b = ctx.saved_tensors
                    return grad * b  # noqa: AGL001, AGL005, E501
            """,
            line=12,
            message="lists AGL005, which silences nothing",
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2  # noqa: AGL999

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """,
            line=6,
            message="AGL999 (not a rule)",
        ),
    ]
