"""Custom autograd.Functions with the bugs autograd-lint exists to catch.

Each class carries one classic mistake; the comment says what happens at run time.
"""

import torch
from torch.autograd import Function


class MulAdd(Function):
    """a * b + c: backward forgets the gradient of c (RuntimeError when backward runs)."""

    @staticmethod
    def forward(ctx, a, b, c):
        ctx.save_for_backward(a, b)
        return a * b + c

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


class KeepsInputOnCtx(Function):
    """The input is kept on ctx instead of save_for_backward: silent wrong gradients
    after an in-place change, and saved-tensor hooks never see it."""

    @staticmethod
    def forward(ctx, x):
        ctx.x = x.detach()
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.x.cos()


class ScaleGradInPlace(Function):
    """backward scales the incoming gradient in place: a sibling branch that shares
    it silently receives a wrong gradient."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        grad.mul_(2)
        return grad


class AddOneInPlace(Function):
    """forward writes into its input without ctx.mark_dirty: the gradient of the
    original tensor is silently wrong."""

    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ListGradients(Function):
    """backward returns a list: 'returned an incorrect number of gradients'."""

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return [grad, grad]


class OldStyleSave(Function):
    """Deprecated ctx API, and saved_tensors unpacked into the wrong count."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y, extra = ctx.saved_variables
        return grad * y, grad * x


def legacy_call(x):
    # Instantiating a Function and calling the instance is the pre-1.3 API.
    return MulAdd()(x, x, x)
