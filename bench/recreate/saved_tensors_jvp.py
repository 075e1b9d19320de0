"""Reading ctx.saved_tensors twice: in backward it raises under non-reentrant checkpointing;
in jvp it does not (AGL005 checks backward and vjp only).
Run: python bench/recreate/saved_tensors_jvp.py  (torch 2.13.0, CPU).

Shaped like pykeops `GenredAutograd` (split style, `save_for_backward` and
`save_for_forward` of the same tensors, `args = ctx.saved_tensors[:-1]` then
`result = ctx.saved_tensors[-1]` in both backward and jvp).

Measured on torch 2.13.0: backward under `checkpoint(..., use_reentrant=False)` raises
`CheckpointError: torch.utils.checkpoint: Unpack is being triggered for a tensor that was
already unpacked once. ...`; jvp under the same checkpoint, and jvp with
`clear_saved_tensors_on_access = True`, both give the tangent [e, e, e].
"""
import torch
import torch.autograd.forward_ad as fwAD
from torch.utils.checkpoint import checkpoint


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)
        ctx.save_for_forward(x, output)

    @staticmethod
    def backward(ctx, g):
        args = ctx.saved_tensors[:-1]
        out = ctx.saved_tensors[-1]
        return g * out

    @staticmethod
    def jvp(ctx, t):
        args = ctx.saved_tensors[:-1]
        out = ctx.saved_tensors[-1]
        return t * out


class ExpCleared(Exp):
    clear_saved_tensors_on_access = True


x = torch.ones(3, requires_grad=True)
try:
    checkpoint(Exp.apply, x, use_reentrant=False).sum().backward()
    print("backward, checkpointed: ok", x.grad.tolist())
except Exception as error:
    print(f"backward, checkpointed: {type(error).__name__}: {str(error)[:120]}")
for cls, run in ((Exp, lambda f, d: checkpoint(f, d, use_reentrant=False)), (ExpCleared, lambda f, d: f(d))):
    with fwAD.dual_level():
        y = run(cls.apply, fwAD.make_dual(torch.ones(3), torch.ones(3)))
        print(f"{cls.__name__}.jvp: tangent {fwAD.unpack_dual(y).tangent.tolist()}")
