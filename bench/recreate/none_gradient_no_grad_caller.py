"""AGL036's VALID no_grad caller: None for inputs the caller computes under no_grad is right.

Run: python bench/recreate/none_gradient_no_grad_caller.py  (torch 2.13.0, CPU).  The
ColossalAI `_Layernorm_2D` pattern: the caller computes the mean and 1/std under
`torch.no_grad()`, forward returns `(x - mean) * inv_std`, backward returns a gradient for
`x` that folds the mean's and the std's dependence in, and None for the two statistics.
Measured: x.grad equals F.layer_norm's (max abs difference 1.8e-15 in float64), and the
statistics have no history, so their None gradients lose nothing.
"""
import torch
import torch.nn.functional as F


class Normalize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mean, inv_std):
        out = (x - mean) * inv_std
        ctx.save_for_backward(out, inv_std)
        return out

    @staticmethod
    def backward(ctx, g):
        out, inv_std = ctx.saved_tensors
        dx = inv_std * (g - g.mean(-1, keepdim=True) - out * (g * out).mean(-1, keepdim=True))
        return dx, None, None


torch.manual_seed(0)
x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
with torch.no_grad():
    mean = x.mean(-1, keepdim=True)
    inv_std = (x.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
print("statistics require grad:", mean.requires_grad, inv_std.requires_grad)
w = torch.randn(4, 8, dtype=torch.float64)
(Normalize.apply(x, mean, inv_std) * w).sum().backward()
ours = x.grad.clone()
x.grad = None
(F.layer_norm(x, (8,), eps=1e-5) * w).sum().backward()
print("max |x.grad - layer_norm's|:", (ours - x.grad).abs().max().item())
