"""Functions run only under torch.compile: one per backend and scenario, so lines don't overlap."""

import torch


def scale(x, flag):
    if flag:
        x = x + 1
    for _ in range(2):
        x = x * 2
    return x


class EagerFwdOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # mark: eager-fwd-only-fwd
        return x ** 2  # mark: eager-fwd-only-fwd

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: eager-fwd-only-bwd
        return 2 * x * grad  # mark: eager-fwd-only-bwd


class AotFwdOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # mark: aot-fwd-only-fwd
        return x ** 3  # mark: aot-fwd-only-fwd

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: aot-fwd-only-bwd
        return 3 * x ** 2 * grad  # mark: aot-fwd-only-bwd


class EagerFwdBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # mark: eager-fwd-bwd-fwd
        return x ** 4  # mark: eager-fwd-bwd-fwd

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: eager-fwd-bwd-bwd
        if grad is None:
            return None
        return 4 * x ** 3 * grad  # mark: eager-fwd-bwd-bwd


class AotFwdBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # mark: aot-fwd-bwd-fwd
        return x ** 5  # mark: aot-fwd-bwd-fwd

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors  # mark: aot-fwd-bwd-bwd
        if grad is None:
            return None
        return 5 * x ** 4 * grad  # mark: aot-fwd-bwd-bwd


def run(function, x):  # mark: compiled-entry
    return function.apply(scale(x, True)).sum()
