"""Static evidence that backward is not the derivative: surrogates of steps, sampled gradients (no torch)."""

from __future__ import annotations

import textwrap

import pytest

from autograd_lint.model.analysis import analyze
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings
from autograd_lint.gentests.not_derivative import not_the_derivative, sampled_gradient, surrogate_of_a_step
from autograd_lint.gentests.surrogate import Surrogate, declared_surrogate


def _spec(source: str):
    text = "import torch\n\n" + textwrap.dedent(source)
    analysis = analyze(SourceFile("m.py", text, "m"), {}, Settings())
    (spec,) = analysis.functions
    return spec, text.splitlines()


SPIKES = {
    "comparison_cast": """
        class Spike(torch.autograd.Function):
            @staticmethod
            def forward(ctx, mem, thr):
                ctx.save_for_backward(mem)
                spk = (mem - thr > 0).float()
                return spk

            @staticmethod
            def backward(ctx, grad):
                (mem,) = ctx.saved_tensors
                s = torch.sigmoid(mem)
                return grad * s * (1 - s), None
    """,
    "method_comparison_to": """
        class Spike(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.gt(0).to(x.dtype)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output / (1 + x.abs()) ** 2
    """,
    "scaled_step": """
        class Step(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, scale: float):
                ctx.scale = scale
                return (x > 0).float() * scale

            @staticmethod
            def backward(ctx, grad):
                return grad * ctx.scale, None
    """,
    "straight_through_clone": """
        class STE(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return (x > 0).float()

            @staticmethod
            def backward(ctx, grad):
                return grad.clone()
    """,
    "one_hot_of_argmax": """
        class Hard(torch.autograd.Function):
            @staticmethod
            def forward(ctx, logits):
                index = logits.argmax(-1)
                return torch.nn.functional.one_hot(index, logits.shape[-1]).to(logits.dtype)

            @staticmethod
            def backward(ctx, grad):
                return grad
    """,
}


@pytest.mark.parametrize("name", sorted(SPIKES))
def test_a_step_forward_with_a_gradient_is_a_surrogate(name: str) -> None:
    spec, lines = _spec(SPIKES[name])
    reason = not_the_derivative(spec, lines) or surrogate_of_a_step(spec, lines)
    assert reason is not None and ("surrogate" in reason or "straight-through" in reason)


NOT_STEPS = {
    "relu_as_a_call": """
        class Relu(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return torch.mul(x, (x > 0).float())

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * (x > 0).float()
    """,
    "relu_by_mask": """
        class ReLU(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return (x > 0).float() * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * (x > 0).float()
    """,
    "step_with_zero_gradient": """
        class Step(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return (x > 0).float()

            @staticmethod
            def backward(ctx, grad):
                return torch.zeros_like(grad)
    """,
    "written_in_a_loop": """
        class Loop(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                for y in [x]:
                    out = y * 2
                return (out > 0).float() + out

            @staticmethod
            def backward(ctx, grad):
                return grad * 2
    """,
    "step_only_of_a_non_differentiated_input": """
        class Masked(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, mask):
                ctx.save_for_backward(mask)
                return x * (mask > 0).float()

            @staticmethod
            def backward(ctx, grad):
                (mask,) = ctx.saved_tensors
                return grad * (mask > 0).float(), None
    """,
    # `unused` is never read; the output's chain of names is six long, the most the check follows.
    "unused_input_behind_six_names": """
        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, unused):
                a = x * 2
                b = a * 2
                c = b * 2
                d = c * 2
                e = d * 2
                f = e * 2
                return f

            @staticmethod
            def backward(ctx, grad):
                return grad * 64, grad
    """,
}


@pytest.mark.parametrize("name", sorted(NOT_STEPS))
def test_forward_that_is_not_piecewise_constant_is_left_alone(name: str) -> None:
    spec, lines = _spec(NOT_STEPS[name])
    assert surrogate_of_a_step(spec, lines) is None
    assert sampled_gradient(spec, lines) is None


def test_random_numbers_in_backward_are_a_sampled_gradient() -> None:
    spec, lines = _spec("""
        class Sampled(torch.autograd.Function):
            @staticmethod
            def forward(ctx, logits):
                ctx.save_for_backward(logits)
                return torch.softmax(logits, -1)

            @staticmethod
            def backward(ctx, grad):
                (logits,) = ctx.saved_tensors
                sample = torch.multinomial(torch.softmax(logits, -1), 1)
                return grad * torch.zeros_like(logits).scatter(-1, sample, 1.0)
    """)
    reason = sampled_gradient(spec, lines)
    assert reason is not None and "multinomial, line 13" in reason


def test_a_straight_through_estimator_is_told_from_its_one_gradient_parameter() -> None:
    """backward's gradients are its parameters after ctx: one here, so the step's own reason."""
    spec, lines = _spec("""
        class Round(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return torch.round(x)

            @staticmethod
            def backward(ctx, grad):
                return grad
    """)
    reason = not_the_derivative(spec, lines)
    assert reason is not None and "straight-through estimator" in reason
    method = "\n".join(lines).replace("torch.round(x)", "x.round()")  # the method spelling too
    spec, lines = _spec(method.removeprefix("import torch\n\n"))
    reason = not_the_derivative(spec, lines)
    assert reason is not None and "straight-through estimator" in reason


def test_a_view_as_another_input_is_not_an_identity() -> None:
    """``x.view_as(y)`` has y's shape: not forward returning x unchanged, so nothing is claimed."""
    spec, lines = _spec("""
        class Like(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x.view_as(y)

            @staticmethod
            def backward(ctx, grad):
                return None, grad
    """)
    assert not_the_derivative(spec, lines) is None


def test_a_gradient_reversal_is_found_with_the_factor_on_either_side() -> None:
    source = """
        class Reverse(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, alpha: float):
                ctx.alpha = alpha
                return x.view_as(x)

            @staticmethod
            def backward(ctx, grad):
                return {}, None
    """
    for gradient in ("-grad * ctx.alpha", "-ctx.alpha * grad"):
        spec, lines = _spec(source.format(gradient))
        reason = not_the_derivative(spec, lines)
        assert reason is not None and "a gradient reversal or scaling" in reason, gradient


def test_a_slice_overwritten_through_data_and_passed_the_whole_gradient_is_named() -> None:
    """torchdiffeq's _UncheckedAssign: the write goes through ``.data[0]``, and the overwritten part gets the gradient."""
    spec, lines = _spec("""
        class Assign(torch.autograd.Function):
            @staticmethod
            def forward(ctx, scratch, value):
                scratch.data[0] = value
                return scratch

            @staticmethod
            def backward(ctx, grad_scratch):
                return grad_scratch, grad_scratch[0]
    """)
    assert not_the_derivative(spec, lines) == (
        "forward overwrites part of 'scratch' and returns it, and backward passes the output gradient to 'scratch' "
        "unchanged, also where it was overwritten (derivative 0 there)")


@pytest.mark.parametrize("above", ["", "\n"])
def test_a_surrogate_declared_at_the_end_of_the_class_line_is_read(above: str) -> None:
    # The class on an even line, then on an odd one: the declaration is read from that line, not a neighbour.
    spec, lines = _spec(above + """
        class Reverse(torch.autograd.Function):  # autograd-lint: surrogate-gradient reference=lambda x: -x
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, grad):
                return -grad
    """)
    assert declared_surrogate(spec, lines, {}) == Surrogate("lambda x: -x")


def test_several_outputs_each_an_input_unchanged_are_judged_output_by_output() -> None:
    """torch's ZeroGradientsGenVmap: forward returns its inputs, backward zeros for them."""
    spec, lines = _spec("""
        class Zero(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x.clone(), y.clone()

            @staticmethod
            def backward(ctx, gx, gy):
                return torch.zeros_like(gx), gy
    """)
    assert not_the_derivative(spec, lines) == (
        "forward returns its input 'x' unchanged and backward returns zeros for it (the derivative of the identity "
        "is the gradient itself): a stop-gradient")
