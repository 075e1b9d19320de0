"""Functions whose forward or backward makes Dynamo break the graph, and the compiled code calling them."""

import torch


class Printing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        print("Printing.forward")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class ExplicitBreak(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        torch._dynamo.graph_break()
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class DataDependent(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.positive = bool(x.sum() > 0)
        if x.sum() > 0:
            return x * 4
        return x * -4

    @staticmethod
    def backward(ctx, grad):
        return grad * (4 if ctx.positive else -4)


class Item(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.scale = x.sum().item()
        return x * ctx.scale

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale


class BreakingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 5

    @staticmethod
    def backward(ctx, grad):
        print("BreakingBackward.backward")
        return grad * 5


FUNCTIONS = [Printing, ExplicitBreak, DataDependent, Item, BreakingBackward]


def loss(function, x):
    return (function.apply(x + 1) - 1).sum()


def loss_and_backward(function, x):
    """``.backward()`` inside the compiled function: the engine runs under Dynamo's frame callback."""
    out = loss(function, x)
    out.backward()
    return out.detach()


def module_hook_inside(x):
    """A Module backward hook registered inside compiled code."""
    layer = torch.nn.Linear(3, 3)
    seen = []
    layer.register_full_backward_hook(lambda module, gin, gout: seen.append(1))
    out = Printing.apply(layer(x)).sum()
    out.backward()
    return len(seen)
