"""AGL003 honours ``allowed_ctx_tensor_attributes`` (catalogue §5 trap 11)."""

from __future__ import annotations

import textwrap

from autograd_lint.model.analysis import analyze
from autograd_lint.lint.engine import check_analysis
from autograd_lint.settings import Settings
from autograd_lint.model.source import SourceFile

SOURCE = textwrap.dedent(
    """
    import torch

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.exp(x)
            ctx.y = y
            ctx.z = x
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.y * ctx.z
    """
)


def _attributes(settings: Settings) -> list[str]:
    analysis = analyze(SourceFile("example.py", SOURCE, "example"), {}, settings)
    return [d.message.split(" as ctx.")[1].split(";")[0] for d in check_analysis(analysis, settings)]


def test_allowed_attribute_is_not_reported() -> None:
    assert _attributes(Settings(select=("AGL003",))) == ["y", "z"]
    allowed = Settings(select=("AGL003",), allowed_ctx_tensor_attributes=frozenset({"y"}))
    assert _attributes(allowed) == ["z"]
