"""Functions and hooks whose code the autograd engine runs on threads coverage does not trace."""

import torch
from torch.autograd.forward_ad import dual_level, make_dual, unpack_dual


class RawSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # mark: raw-fwd
        return x * x  # mark: raw-fwd

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: raw-bwd
        return 2 * x * grad  # mark: raw-bwd


class Deep(torch.autograd.Function):
    """Backward re-enters backward; past depth 60 the engine moves to C++ pool threads."""

    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if ctx.depth > 0:
            with torch.enable_grad():
                y = torch.ones(1, requires_grad=True)
                Deep.apply(y, ctx.depth - 1).sum().backward()
        else:
            grad = grad * 1  # mark: deep-bottom
        return grad, None


class Twice(torch.autograd.Function):
    """Used with create_graph=True (double backward) and with forward-mode AD (jvp)."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad * 2

    @staticmethod
    def jvp(ctx, tangent):
        return tangent * 2


class NeverBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        return grad  # mark: never-bwd


def double_grad(grad):
    return grad * 2  # mark: tensor-hook


def module_hook(module, grad_input, grad_output):
    return None  # mark: module-hook


def forward_grad(x):
    with dual_level():
        return unpack_dual(Twice.apply(make_dual(x, torch.ones_like(x)))).tangent
