"""AGL001 on a gradient tuple bound to a name and joined to leading Nones (issue 23 item 4,
session 6): ``grads = (gx, gw); return (None, None, None) + grads`` for 4 inputs.

Run: python bench/recreate/named_tuple_gradients.py  (torch 2.13.0, CPU).  Measured:
with 3 leading Nones (5 values for 4 inputs, the last one a tensor) backward raises
``RuntimeError: function ShardedLinearBackward returned an incorrect number of gradients
(expected 4, got 5)``; with 2 it runs and gives the right gradients.  Gradients from a
same-module helper's tuple, ``(None,) + _linear_grads(g, x, w)`` for 4 inputs, raise
``(expected 4, got 3)``.
"""
import torch


def make(leading):
    class ShardedLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, group, chunks, x, w):
            ctx.save_for_backward(x, w)
            return x @ w.t()

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            grads = (g @ w, g.t() @ x)
            return (None,) * leading + grads

    return ShardedLinear


def _linear_grads(g, x, w):
    return g @ w, g.t() @ x


class HelperGrads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, chunks, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return (None,) + _linear_grads(g, x, w)


x = torch.randn(3, 4, requires_grad=True)
w = torch.randn(5, 4, requires_grad=True)
for leading in (3, 2):
    try:
        make(leading).apply(None, 2, x, w).sum().backward()
        print(leading, "leading Nones: runs; x.grad matches:", torch.allclose(x.grad, torch.ones(3, 5) @ w))
    except RuntimeError as error:
        print(leading, "leading Nones:", type(error).__name__, error)
try:
    HelperGrads.apply(None, 2, x, w).sum().backward()
except RuntimeError as error:
    print("helper:", type(error).__name__, error)
