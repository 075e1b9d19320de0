"""`Fn.apply(...)` passing fewer arguments than forward requires, or more than it takes (AGL037).
Run: python bench/recreate/apply_argument_count.py  (torch 2.13.0, CPU).

Shaped like long-context-attention `RingFlashInferAttnFunc`: forward takes 14 inputs (the
last, `attn_processor`, without a default) and two wrappers of the module call `apply` with
13 arguments.

Measured on torch 2.13.0: combined style, one too few: `TypeError: Ring.forward() missing 1
required positional argument: 'attn_processor'`; one too many: `TypeError: Ring.forward()
takes 4 positional arguments but 5 were given`; setup_context style, one too few:
`TypeError: missing a required argument: 'b'`.  A defaulted
input left out runs ([2.0, 2.0]).
"""
import torch


class Ring(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, group, attn_processor):
        return q * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None, None


class Defaulted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, group=None):
        return q * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


class Split(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g, g


def run(label, call):
    q = torch.ones(2, requires_grad=True)
    try:
        call(q).sum().backward()
        print(label, "->", q.grad.tolist())
    except TypeError as error:
        print(label, "->", f"TypeError: {error}")


run("combined, one too few", lambda q: Ring.apply(q, None))
run("combined, one too many", lambda q: Ring.apply(q, None, None, None))
run("setup_context, one too few", lambda q: Split.apply(q))
run("defaulted input left out", lambda q: Defaulted.apply(q))
