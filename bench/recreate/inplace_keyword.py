"""`f(x, ..., inplace=flag)` in a Function writes x when the flag holds (AGL008 in forward,
AGL007 in backward).  Run: python bench/recreate/inplace_keyword.py  (torch 2.13.0, CPU).

Shaped like flash-attention/ThunderKittens `ApplyRotaryEmb` (forward `apply_rotary(x, ...,
inplace=inplace)` and `return out if not inplace else x`; backward `apply_rotary(do, ...,
inplace=ctx.inplace)`), with a helper that scales by 2 in place when asked.

Measured on torch 2.13.0: forward inplace=True, the caller's residual `x + F(x)` gets
a.grad [3, 6, 9] where y = 4a needs [4, 8, 12] (inplace=False: right); backward
inplace=True on the expanded gradient of `.sum()` raises `unsupported operation: more
than one element of the written-to tensor refers to a single memory location`.
"""
import torch


def scale2(x, inplace=False):
    out = x if inplace else torch.empty_like(x)
    out.copy_(x * 2)
    return out


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, inplace=False):
        out = scale2(x, inplace=inplace)
        ctx.inplace = inplace
        return out if not inplace else x

    @staticmethod
    def backward(ctx, do):
        return scale2(do, inplace=ctx.inplace), None


class ScaleForwardOnly(Scale):
    """The in-place forward with an out-of-place backward (forward's write alone)."""

    @staticmethod
    def backward(ctx, do):
        return do * 2, None


W = torch.tensor([1.0, 2.0, 3.0])  # a dense incoming gradient (sum() alone gives an expanded one)

# forward: the caller keeps using x after an in-place call (a residual).
for inplace in (False, True):
    a = torch.ones(3, requires_grad=True)
    x = a * 1
    y = x + ScaleForwardOnly.apply(x, inplace)
    (y * W).sum().backward()
    print(f"forward inplace={inplace}: y={y.tolist()} a.grad={a.grad.tolist()} (correct: y is {y[0].item():g}*a, so {(y[0].item() * W).tolist()})")

# backward: the incoming gradient is shared with another branch (y = F(a) + b), or expanded.
for inplace in (False, True):
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    ((Scale.apply(a * 1, inplace) + b) * W).sum().backward()
    print(f"backward inplace={inplace}: b.grad={b.grad.tolist()} (correct {W.tolist()}) a.grad={a.grad.tolist()}")
    try:
        Scale.apply(torch.ones(3, requires_grad=True) * 1, inplace).sum().backward()
        print(f"backward inplace={inplace}, expanded gradient: ok")
    except RuntimeError as e:
        print(f"backward inplace={inplace}, expanded gradient: RuntimeError: {str(e)[:90]}")
