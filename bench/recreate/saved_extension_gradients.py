"""AGL009 on gradients an extension computes in forward and a pure-torch backward scales
(RWKV-LM RWKV-v7 `HeadL2WrapCrossEntropyCUDAV4`: `loss, grad_hidden, grad_weight = EXT.forward(...)`,
saved, backward returns `grad_hidden * scale`).  The extension is stood in for by a
function computing the same values without autograd history, as a kernel's are.

Run: python bench/recreate/saved_extension_gradients.py  (torch 2.13.0, CPU).  Measured:
gradcheck passes, gradgradcheck fails (Jacobian mismatch), with no error: a double
backward silently misses the second-derivative terms.
"""
import torch


def ext_forward(h, w):
    """loss = sum((h @ w.t())**2) / 2 and its gradients, without history (as a kernel)."""
    with torch.no_grad():
        out = h @ w.t()
        return (out**2).sum() / 2, out @ w, out.t() @ h


class Fused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w):
        loss, grad_h, grad_w = ext_forward(h, w)
        ctx.save_for_backward(grad_h, grad_w)
        return loss

    @staticmethod
    def backward(ctx, g):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * g, grad_w * g


h = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
w = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
print("gradcheck:", torch.autograd.gradcheck(Fused.apply, (h, w)))
print("gradgradcheck:", torch.autograd.gradgradcheck(Fused.apply, (h, w), raise_exception=False))
