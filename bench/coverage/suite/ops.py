"""A small backward-heavy library: custom Functions and a hooked module."""

import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.k, None


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def clip_hook(grad):
    return grad.clamp(-10, 10)


def step(x):
    y = Square.apply(Scale.apply(x, 3.0))
    y.register_hook(clip_hook)
    return y.sum()


class AddBias(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias):
        return x + bias

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(0)


class Tanh(torch.autograd.Function):
    """New-style: forward without ctx, setup_context saves the output."""

    @staticmethod
    def forward(x):
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class Neg(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        return -grad


def chain(x, bias):
    """Eight small Functions deep, four kinds, one of them new-style."""
    for _ in range(2):
        x = Neg.apply(Double.apply(Tanh.apply(AddBias.apply(x, bias))))
    return x.sum()
