"""ctx handed to a helper that reads ctx.saved_tensors a second time (AGL005 through helpers).
Run: python bench/recreate/saved_tensors_helper.py  (torch 2.13.0, CPU).

Shaped like pykeops `GenredAutograd.backward`, which returns
`GenredAutograd_base._backward(ctx, G, _)`, a static method of another class of the module
that reads `args = ctx.saved_tensors[:-1]` and then `result = ctx.saved_tensors[-1]`; and a
module function reached through another (`_outer(ctx, g)` -> `_grads(ctx, g)`) after
backward's own read.

Measured on torch 2.13.0: plain backward gives x.grad [2, 4, 6] for both; under
`checkpoint(..., use_reentrant=False)` both raise `CheckpointError: torch.utils.checkpoint:
Unpack is being triggered for a tensor that was already unpacked once. ...`; with
`clear_saved_tensors_on_access = True` both raise `RuntimeError: saved_tensors can only be
accessed once ...`.  A helper that reads once, called by a backward that does not read
(Once), runs under checkpointing: [2, 4, 6].
"""
import torch
from torch.utils.checkpoint import checkpoint


class Base:
    @staticmethod
    def _backward(ctx, g):
        (x,) = ctx.saved_tensors[:-1]
        result = ctx.saved_tensors[-1]
        return g * 2 * x + 0 * result


class Genred(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        result = x * x
        ctx.save_for_backward(x, result)
        return result

    @staticmethod
    def backward(ctx, g):
        return Base._backward(ctx, g)


def _grads(ctx, g):
    (x,) = ctx.saved_tensors
    return g * x


def _outer(ctx, g):
    return _grads(ctx, g)


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _outer(ctx, g) + g * x


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        return _outer(ctx, g) * 2


def run(fn, how):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    try:
        y = checkpoint(fn.apply, x, use_reentrant=False) if how == "checkpoint" else fn.apply(x)
        y.sum().backward()
        return f"x.grad {x.grad.tolist()}"
    except Exception as error:  # noqa: BLE001 - the point is which error
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"


for fn in (Genred, Twice, Once):
    for how in ("plain", "checkpoint"):
        print(fn.__name__, how, "->", run(fn, how))
    if fn is not Once:
        fn.clear_saved_tensors_on_access = True
        print(fn.__name__, "clear_saved_tensors_on_access ->", run(fn, "plain"))
