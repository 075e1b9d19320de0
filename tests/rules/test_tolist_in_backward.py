"""``.tolist()`` in backward: a Python value cut off from autograd, as ``.item()`` is (AGL009, AGL033).

Checked on torch 2.13: with ``w`` a 0-d tensor, ``grad * w.tolist()`` gives a second
derivative through ``w`` of 2.94 where the true one is 5.89 (silently wrong: AGL009);
``torch.ones_like(x) * grad.tolist()`` as Sum's backward gives a gradient with no
history at all, so a double backward raises or misses every term (AGL033).  Used as a
shape or an index, the list loses nothing, and nothing is reported.
"""

from __future__ import annotations

import textwrap

import pytest

from autograd_lint.lint.engine import check_analysis
from autograd_lint.model.analysis import analyze
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings

SCALE = """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
"""
SUM = """
import torch

class Sum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sum()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.ones_like(x) * grad.tolist()
"""


def findings(source: str) -> list[tuple[str, int, str]]:
    settings = Settings(select=("AGL009", "AGL033"))
    text = textwrap.dedent(source).lstrip()
    analysis = analyze(SourceFile("ops.py", text, "ops"), {}, settings)
    return [(d.code, d.line, d.message) for d in check_analysis(analysis, settings, honour_noqa=False)]


def backward(body: str) -> str:
    return SCALE + textwrap.indent(textwrap.dedent(body), " " * 8)


@pytest.mark.parametrize("body", [
    "return grad * w.tolist(), (grad * x).sum()\n",
    "scale = w.tolist()\nreturn grad * scale, (grad * x).sum()\n",
])
def test_tolist_mixed_with_the_gradient_is_agl009(body: str) -> None:
    ((code, line, message),) = findings(backward(body))
    assert (code, line) == ("AGL009", 10)
    assert message.startswith("Scale.backward is not correctly double-differentiable (its result depends on "
                              "`.tolist()` on line 12)")


def test_a_gradient_made_only_from_tolist_is_agl033() -> None:
    ((code, line, message),) = findings(SUM)
    assert (code, line) == ("AGL033", 10)
    assert message.startswith("Sum.backward returns a gradient cut off from autograd by `.tolist()` on line 12")


def test_a_tensor_rebuilt_from_tolist_has_no_history() -> None:
    """Everything returned is cut off (the list, then ``.item()``): AGL033, not AGL009."""
    body = "rebuilt = torch.as_tensor(grad.tolist())\nreturn rebuilt * w.item(), None\n"
    ((code, line, message),) = findings(backward(body))
    assert (code, line) == ("AGL033", 10)
    assert "cut off from autograd by `.item()` on line 13" in message


SEGMENT_SUM = """
import torch

class SegmentSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lengths):
        ctx.save_for_backward(lengths)
        return torch.stack([part.sum() for part in x.split(lengths.tolist())])

    @staticmethod
    def backward(ctx, grad):
        (lengths,) = ctx.saved_tensors
        return torch.cat([g.expand(n) for g, n in zip(grad, lengths.tolist())]), None
"""


def test_tolist_as_sizes_or_an_index_is_not_reported() -> None:
    assert findings(SEGMENT_SUM) == []
    assert findings(backward("return grad * x[w.long().tolist()], (grad * x).sum()\n")) == []


def test_once_differentiable_silences_both() -> None:
    source = SUM.replace("    @staticmethod\n    def backward", "    @staticmethod\n    @once_differentiable\n    def backward")
    source = source.replace("import torch\n", "import torch\nfrom torch.autograd.function import once_differentiable\n", 1)
    assert "@once_differentiable" in source
    assert findings(source) == []
