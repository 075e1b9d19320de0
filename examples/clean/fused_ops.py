"""Correct custom autograd.Functions, in the styles real kernels use."""

from typing import Optional

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class LinearFunction(Function):
    """y = x @ w.T + b, split style (usable with torch.func)."""

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None):
        out = x @ weight.t()
        if bias is not None:
            out = out + bias
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_out @ weight
        if ctx.needs_input_grad[1]:
            grad_w = grad_out.t() @ x
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(0)
        return grad_x, grad_w, grad_b


class ScaledExp(Function):
    """exp(x) * scale, with a non-tensor argument that gets a None gradient."""

    @staticmethod
    def forward(ctx, x, scale: float = 1.0):
        out = torch.exp(x) * scale
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (out,) = ctx.saved_tensors
        return grad_out * out, None


class InplaceRelu(Function):
    """ReLU that writes into its input, declared with mark_dirty."""

    @staticmethod
    def forward(ctx, x):
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        (out,) = ctx.saved_tensors
        return grad_out * (out > 0).to(grad_out.dtype)


class SplitHalves(Function):
    """Two outputs: backward takes one gradient per output."""

    @staticmethod
    def forward(ctx, x):
        first, second = x.chunk(2, dim=-1)
        return first.clone(), second.clone()

    @staticmethod
    def backward(ctx, grad_first, grad_second):
        return torch.cat([grad_first, grad_second], dim=-1)
