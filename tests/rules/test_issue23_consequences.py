"""Severities and messages that follow what really happens on torch 2.13
(bench/recreate/issue23_messages.py re-creates each)."""

from __future__ import annotations

import textwrap

from autograd_lint.rules.agl001_gradient_count import GradientCount
from autograd_lint.rules.base import Severity
from test_rule_examples import findings

ARGMAX = textwrap.dedent(
    """
    import torch

    class Argmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, dim):
            out = x.argmax(dim).float()
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def backward(ctx, grad):
            return grad
    """
)


def test_agl001_is_silent_where_every_output_is_non_differentiable() -> None:
    # backward never runs (torch 2.13: the output does not require grad), so its count has no consequence.
    assert findings(GradientCount, ARGMAX) == []


def test_agl001_stays_an_error_where_some_output_needs_grad() -> None:
    # Two outputs, one marked: backward runs for the other.
    source = ARGMAX.replace("return out\n", "return out, x * 2\n").replace(
        "def backward(ctx, grad):", "def backward(ctx, grad, grad2):"
    )
    (found,) = findings(GradientCount, source)
    assert found.severity is Severity.ERROR
    # A mark on another name than the one returned: error.
    source = ARGMAX.replace("return out\n", "return out + 0\n")
    (found,) = findings(GradientCount, source)
    assert found.severity is Severity.ERROR


def test_agl153_classmethod_setup_context_is_an_error_forward_info() -> None:
    from autograd_lint.rules.agl153_classmethod_graph_break import ClassmethodGraphBreak

    split = ClassmethodGraphBreak.INVALID[2].source
    (found,) = findings(ClassmethodGraphBreak, split)
    assert found.severity is Severity.ERROR and "even without fullgraph" in found.message
    (found,) = findings(ClassmethodGraphBreak, ClassmethodGraphBreak.INVALID[0].source)
    assert found.severity is Severity.INFO and "graph-breaks" in found.message
