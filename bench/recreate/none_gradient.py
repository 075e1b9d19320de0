"""AGL036: backward returning None for an input the output is computed from.

Run: python bench/recreate/none_gradient.py  (torch 2.13.0, CPU).  Measured: no error and
no warning; `bias.grad` stays None after `loss.backward()`, and an SGD step leaves the
bias unchanged (the weight moves).
"""
import warnings

import torch


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, bias):
        ctx.save_for_backward(x, w)
        return x @ w.t() + bias

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x, None


x = torch.randn(4, 3)
w = torch.randn(2, 3, requires_grad=True)
bias = torch.zeros(2, requires_grad=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    Linear.apply(x, w, bias).pow(2).sum().backward()
print("warnings:", [str(c.message) for c in caught])
print("bias.grad:", bias.grad, "w.grad is None:", w.grad is None)
before = bias.detach().clone()
torch.optim.SGD([w, bias], lr=0.1).step()
print("bias unchanged after a step:", torch.equal(before, bias.detach()))
