"""A Function whose backward is spelled ``vjp`` (torch's alias) is checked as backward is.

Checked on torch 2.13: ``Mul`` below raises ``function MulBackward returned an incorrect
number of gradients (expected 2, got 1)`` at ``.backward()``.
"""

from __future__ import annotations

import textwrap

from autograd_lint.lint.engine import check_analysis
from autograd_lint.model.analysis import analyze
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings

MUL = textwrap.dedent(
    """
    import torch

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def vjp(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b
    """
).lstrip()


def test_a_vjp_returning_too_few_gradients_is_agl001() -> None:
    settings = Settings(select=("AGL001",))
    analysis = analyze(SourceFile("ops.py", MUL, "ops"), {}, settings)
    found = [(d.code, d.line, d.message) for d in check_analysis(analysis, settings, honour_noqa=False)]
    assert found == [("AGL001", 12, "Mul.vjp returns 1 gradient, but forward takes 2 inputs: backward raises "
                                    "`returned an incorrect number of gradients (expected 2, got 1)`")]
