"""``gradient_given``: which forward inputs backward may give a gradient, by position."""

from __future__ import annotations

import textwrap

from autograd_lint.model.analysis import analyze
from autograd_lint.model.source import SourceFile
from autograd_lint.rules._common import gradient_given
from autograd_lint.settings import Settings


def given(backward_body: str, inputs: int = 4) -> list[bool | None]:
    params = ", ".join(f"a{i}" for i in range(inputs))
    source = textwrap.dedent(
        f"""
        import torch

        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, {params}):
                return a0 * 2

            @staticmethod
            def backward(ctx, grad: torch.Tensor):
        """
    ) + textwrap.indent(textwrap.dedent(backward_body), " " * 8)
    analysis = analyze(SourceFile("f.py", source, "f"), {}, Settings())
    (function,) = analysis.functions
    return [gradient_given(function, i) for i in range(inputs)]


def test_tuple_returns_decide_every_position() -> None:
    assert given("return grad, None, grad * 2, None\n") == [True, False, True, False]
    body = """
    dw = None
    if ctx.needs_input_grad[1]:
        dw = grad.sum()
    if ctx.a:
        return grad, None, None, None
    return grad, dw, None, *[None] * 1
    """
    assert given(body) == [True, True, False, False]


def test_a_starred_tail_leaves_later_positions_open() -> None:
    assert given("return grad, None, *rest\n") == [True, False, None, None]


def test_an_opaque_return_decides_nothing_it_does_not_show() -> None:
    body = """
    if ctx.a:
        return grad, None, None, None
    return helper(ctx, grad)
    """
    assert given(body) == [True, None, None, None]
    assert given("raise NotImplementedError\n") == [None] * 4


def test_zeros_are_no_gradient() -> None:
    body = """
    if ctx.empty:
        return torch.zeros_like(ctx.a), grad.new_zeros(3), None, grad
    return grad, None, torch.zeros(2), grad
    """
    assert given(body) == [True, False, False, True]


def test_with_one_input_an_opaque_return_is_its_gradient() -> None:
    assert given("return kernel_backward(ctx, grad)\n", inputs=1) == [True]
    assert given("return kernel_backward(ctx, grad)\n", inputs=2) == [None, None]
