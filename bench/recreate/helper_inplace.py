"""A Function that hands a tensor to a same-module helper which writes its parameter in
place (AGL007 in backward, AGL008 in forward).  Run: python bench/recreate/helper_inplace.py
(torch 2.13.0, CPU).

Shaped like ColossalAI `tensor/comm_spec.py`: `_ReduceGrad.backward` returns
`_all_reduce(grad_output, ...)`, whose body calls `dist.all_reduce(tensor, ...)` on its
parameter.  A collective can't run here (one process); `_sum_ranks` stands in for it with
the same in-place effect on its argument (`tensor.mul_(world)`: the sum over `world`
ranks holding the same gradient).  A write through the helper is the write itself.

Measured on torch 2.13.0:
- backward: the incoming gradient is shared with another branch (`y = Id(b) + F(a)`):
  b.grad [2, 4, 6] where [1, 2, 3] is right (a.grad [2, 4, 6], as intended); on the
  expanded gradient of `.sum()`: `RuntimeError: unsupported operation: more than one
  element of the written-to tensor refers to a single memory location. Please clone()
  the tensor before performing the operation.`
- forward: the caller keeps using x (a residual `x + F(x)`, F = x * 2 through the helper,
  no mark_dirty): the caller's x is overwritten, y = [4, 4, 4] where x + 2x is [3, 3, 3],
  and a.grad [3, 6, 9] where y = 4a needs [4, 8, 12]; with `x.clone()` passed to the
  helper instead: y [3, 3, 3], a.grad [3, 6, 9], right.
"""
import torch

WORLD = 2


def _sum_ranks(tensor):
    """What `dist.all_reduce(tensor)` does to its argument on every rank holding the same values."""
    tensor.mul_(WORLD)
    return tensor


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ReduceGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return _sum_ranks(grad_output)


class ReduceGradClone(ReduceGrad):
    @staticmethod
    def backward(ctx, grad_output):
        return _sum_ranks(grad_output.clone())


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _sum_ranks(x)

    @staticmethod
    def backward(ctx, g):
        return g * WORLD


class DoubleClone(Double):
    @staticmethod
    def forward(ctx, x):
        return _sum_ranks(x.clone())


W = torch.tensor([1.0, 2.0, 3.0])  # a dense incoming gradient (sum() alone gives an expanded one)

for cls in (ReduceGrad, ReduceGradClone):
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    ((Identity.apply(b * 1) + cls.apply(a * 1)) * W).sum().backward()
    print(f"{cls.__name__}: b.grad={b.grad.tolist()} (correct {W.tolist()}) a.grad={a.grad.tolist()}")
    try:
        cls.apply(torch.ones(3, requires_grad=True) * 1).sum().backward()
        print(f"{cls.__name__}, expanded gradient: ok")
    except RuntimeError as error:
        print(f"{cls.__name__}, expanded gradient: RuntimeError: {error}")

for cls in (Double, DoubleClone):
    a = torch.ones(3, requires_grad=True)
    x = a * 1
    y = x + cls.apply(x)
    (y * W).sum().backward()
    print(f"{cls.__name__}: y={y.tolist()} (x + 2x: [3, 3, 3]) a.grad={a.grad.tolist()} (for y = {y[0].item():g}a: {(y[0].item() * W).tolist()})")
