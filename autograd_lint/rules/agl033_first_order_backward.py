"""AGL033: a first-order backward (kernels, extensions, no_grad, detach) without ``@once_differentiable``."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules._double_backward import AddOnceDifferentiable, reports
from autograd_lint.rules.base import FixSafety, FunctionContext, Invalid, Report, Rule, Severity, Valid


class FirstOrderBackward(Rule):
    """Reports a backward (or vjp) without ``@once_differentiable`` whose result autograd
    cannot differentiate again at all: it comes from code autograd can't see (a Triton
    kernel launch ``kernel[grid](...)``, a cuTile ``launch``, a function of a compiled
    extension module or of a project module under a ``triton`` package, a function of
    the same file that launches a Triton kernel), or the whole returned gradient is cut
    off from autograd (computed under ``torch.no_grad()``, ``.detach()``, ``.data``), or
    backward recomputes with autograd on detached leaf copies of its tensors
    (``x.detach().requires_grad_()``), whose terms the second derivative then lacks.
    Such a backward is first-order by design; the finding matters to code that
    differentiates through it twice (gradient penalties, Hessian-vector products).

    It reports what AGL009 would otherwise report: a backward with the evidence AGL009
    uses (a cut value reaching the result; a tensor without history saved in forward or
    kept on ctx and read by backward), where that evidence is not the real reason.  A
    kernel backward with no such evidence is not reported.  Where backward's gradients
    come only from a call into code this check can't see (another module's function)
    and nothing shows backward computing with a history-less tensor in its own torch
    code, the message says so and names the call: whether it is a kernel or torch code
    is not known, and the consequence it states holds either way.  A backward that mixes
    such values with values that have history in its own torch code is AGL009's."""

    code = "AGL033"
    title = "first-order backward (kernel, extension, no_grad or detach) lacks `@once_differentiable`"
    severity = Severity.WARNING
    enabled_by_default = False
    fix = FixSafety.UNSAFE  # add @once_differentiable: double backward then raises instead
    fixer = AddOnceDifferentiable
    why = (
        "Checked on torch 2.13 with f(x)=x·sin x at x=1.5 and a backward that returns its gradient "
        "computed under no_grad (or detached): differentiating that gradient directly raises "
        "`RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`, "
        "an error that does not name the Function; where the gradient also has history from "
        "another path, the Function's second-derivative terms are silently left out: y=F(x)+x³ "
        "gives d²y/dx² 9.0 instead of 7.645, and a gradient penalty (L=y²/2, loss=L+(dL/dx)², "
        "backward) gives x.grad 1.651 instead of -1.021, with no error. With "
        "`@once_differentiable` the penalty raises `RuntimeError: trying to differentiate twice a "
        "function that was marked with @once_differentiable` (it does so when the incoming gradient "
        "requires grad, as it does there)."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        yield from reports(ctx, self.code)

    VALID = [
        # A torch helper of the same file is code autograd sees (AGL009's business).
        Valid(
            """
            import torch

            def _grad_input(grad, y):
                return grad * y * (1 - y)

            class Sig(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.sigmoid(x) * 1
                    ctx.save_for_backward(y)
                    return y * 2

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return _grad_input(grad * 2, y)
            """
        ),
        # Marked: a double backward raises a clear error.
        Valid(
            """
            import torch
            import triton
            from torch.autograd.function import once_differentiable

            class RMSNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, eps):
                    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                    ctx.save_for_backward(x, rstd)
                    return x * rstd

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    x, rstd = ctx.saved_tensors
                    dx = torch.empty_like(x)
                    _rms_bwd_kernel[(x.shape[0],)](dx, grad, x, rstd)
                    return dx, None
            """
        ),
        # A pure-torch backward mixing a saved intermediate with the incoming gradient is
        # AGL009's (its second derivative is silently wrong), not this rule's.
        Valid(
            """
            import torch

            class XSinX(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a):
                    s = torch.sin(a)
                    ctx.save_for_backward(a, s)
                    return a * s

                @staticmethod
                def backward(ctx, grad):
                    a, s = ctx.saved_tensors
                    return grad * (s + a * torch.cos(a))
            """
        ),
        # Saved integer ids, a mask and a saved value read only for its shape are no
        # evidence, whatever computes the gradient.
        Valid(
            """
            import torch

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, target):
                    ids = target.clamp(min=0).long()
                    keep = target >= 0
                    y = torch.exp(x)
                    ctx.save_for_backward(x, ids, keep, y)
                    return y.gather(-1, ids)

                @staticmethod
                def backward(ctx, g):
                    x, ids, keep, y = ctx.saved_tensors
                    dx = torch.empty(y.shape, dtype=g.dtype)
                    _gather_bwd_kernel[(x.shape[0],)](dx, g, x, ids, keep)
                    return dx, None
            """
        ),
        # `layers[i](grad)` calls one of a list of callables, not a Triton kernel; the
        # gradient is not cut off (the detached copy only gives a shape).
        Valid(
            """
            import torch

            class Route(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, i):
                    ctx.i = i
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    layers = [torch.neg, torch.tanh]
                    n = grad.detach().shape[0]
                    return layers[ctx.i](grad).narrow(0, 0, n) * 2, None
            """
        ),
    ]
    INVALID = [
        # Backward launches a kernel: name it, not the saved value.
        Invalid(
            """
            import torch
            import fused_cuda

            class Fused(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.tanh(x)
                    ctx.save_for_backward(y)
                    return y * 2

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return fused_cuda.tanh_backward(grad, y) * 2
            """,
            line=12,
            message="computes its gradients with `fused_cuda.tanh_backward(...)` on line 14, a function of a compiled extension module",
            fixed="""
            import torch
            import fused_cuda
            from torch.autograd.function import once_differentiable

            class Fused(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.tanh(x)
                    ctx.save_for_backward(y)
                    return y * 2

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return fused_cuda.tanh_backward(grad, y) * 2
            """,
        ),
        # The items of a detached tensor, through a comprehension: no history at all.
        Invalid(
            """
            import torch

            class Chunks(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    parts = grad.detach().chunk(2)
                    out = [p * 2 for p in parts]
                    return torch.cat(out)
            """,
            line=9,
            message="returns a gradient cut off from autograd by `.detach()` on line 10",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Chunks(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    parts = grad.detach().chunk(2)
                    out = [p * 2 for p in parts]
                    return torch.cat(out)
            """,
        ),
        # A gradient computed under no_grad (on purpose, to save memory); ctx is not called ctx.
        Invalid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(self, x):
                    self.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(self, grad):
                    (x,) = self.saved_tensors
                    with torch.no_grad():
                        gx = 2 * x * grad
                    return gx
            """,
            line=10,
            message="cut off from autograd by `with torch.no_grad()` on line 12",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(self, x):
                    self.save_for_backward(x)
                    return x * x

                @staticmethod
                @once_differentiable
                def backward(self, grad):
                    (x,) = self.saved_tensors
                    with torch.no_grad():
                        gx = 2 * x * grad
                    return gx
            """,
        ),
        # A Triton launch: the returned buffer is written by the kernel.
        Invalid(
            """
            import torch

            class RMSNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, eps):
                    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                    ctx.save_for_backward(x, rstd)
                    return x * rstd

                @staticmethod
                def backward(ctx, grad):
                    x, rstd = ctx.saved_tensors
                    dx = torch.empty_like(x)
                    _rms_bwd_kernel[(x.shape[0],)](dx, grad, x, rstd)
                    return dx, None
            """,
            line=11,
            message="computes its gradients with `_rms_bwd_kernel[...](...)` on line 14, a Triton kernel launch",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class RMSNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, eps):
                    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                    ctx.save_for_backward(x, rstd)
                    return x * rstd

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    x, rstd = ctx.saved_tensors
                    dx = torch.empty_like(x)
                    _rms_bwd_kernel[(x.shape[0],)](dx, grad, x, rstd)
                    return dx, None
            """,
        ),
        # A cuTile launch writing the returned buffer; a view of an input saved.
        Invalid(
            """
            import cuda.tile as ct
            import torch

            class PolyNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    x2d = x.reshape(-1, x.shape[-1]) * 1.0
                    ctx.save_for_backward(x2d, w)
                    return x * w

                @staticmethod
                def backward(ctx, dy):
                    x2d, w = ctx.saved_tensors
                    dx = torch.empty_like(x2d)
                    dw = torch.zeros_like(w)
                    ct.launch(torch.cuda.current_stream(), (x2d.shape[0],), _bwd, (dy, dx, dw, x2d, w))
                    return dx.view(dy.shape), dw
            """,
            line=12,
            message="`ct.launch(...)` on line 16, a cuTile kernel launch",
            fixed="""
            import cuda.tile as ct
            import torch
            from torch.autograd.function import once_differentiable

            class PolyNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    x2d = x.reshape(-1, x.shape[-1]) * 1.0
                    ctx.save_for_backward(x2d, w)
                    return x * w

                @staticmethod
                @once_differentiable
                def backward(ctx, dy):
                    x2d, w = ctx.saved_tensors
                    dx = torch.empty_like(x2d)
                    dw = torch.zeros_like(w)
                    ct.launch(torch.cuda.current_stream(), (x2d.shape[0],), _bwd, (dy, dx, dw, x2d, w))
                    return dx.view(dy.shape), dw
            """,
        ),
        # A function imported (inside backward) from a Triton module of the project.
        Invalid(
            """
            import torch

            class Conv(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    state = x.cumsum(1)
                    ctx.save_for_backward(x, weight, state)
                    return x * weight

                @staticmethod
                def backward(ctx, dy):
                    from mylib.ops.triton.conv import conv_bwd
                    x, weight, state = ctx.saved_tensors
                    dx, dw = conv_bwd(dy, x, weight, state)
                    return dx, dw
            """,
            line=11,
            message="a function of the Triton module `mylib.ops.triton.conv`",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Conv(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    state = x.cumsum(1)
                    ctx.save_for_backward(x, weight, state)
                    return x * weight

                @staticmethod
                @once_differentiable
                def backward(ctx, dy):
                    from mylib.ops.triton.conv import conv_bwd
                    x, weight, state = ctx.saved_tensors
                    dx, dw = conv_bwd(dy, x, weight, state)
                    return dx, dw
            """,
        ),
        # A function of this module that launches a Triton kernel.
        Invalid(
            """
            import torch

            def _scan_bwd(dout, h, w):
                dx, dw = torch.empty_like(h), torch.empty_like(w)
                _scan_bwd_kernel[(h.shape[0],)](dx, dw, dout, h, w)
                return dx, dw

            class Scan(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    h = x @ w
                    ctx.save_for_backward(h, w)
                    return h.relu()

                @staticmethod
                def backward(ctx, dout):
                    h, w = ctx.saved_tensors
                    dx, dw = _scan_bwd(dout, h, w)
                    return dx, dw
            """,
            line=16,
            message="`_scan_bwd(...)` on line 18, a function of this module that launches a Triton kernel",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            def _scan_bwd(dout, h, w):
                dx, dw = torch.empty_like(h), torch.empty_like(w)
                _scan_bwd_kernel[(h.shape[0],)](dx, dw, dout, h, w)
                return dx, dw

            class Scan(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    h = x @ w
                    ctx.save_for_backward(h, w)
                    return h.relu()

                @staticmethod
                @once_differentiable
                def backward(ctx, dout):
                    h, w = ctx.saved_tensors
                    dx, dw = _scan_bwd(dout, h, w)
                    return dx, dw
            """,
        ),
        # An identity whose backward detaches the gradient on one path.
        Invalid(
            """
            import torch

            class Identity(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, dtype):
                    ctx.dtype = x.dtype
                    return x.to(dtype)

                @staticmethod
                def backward(ctx, grad):
                    out = grad
                    if grad.dtype == ctx.dtype:
                        out = grad.detach()
                    else:
                        out = grad.to(ctx.dtype)
                    return out, None
            """,
            line=10,
            message="cut off from autograd by `.detach()` on line 13",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Identity(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, dtype):
                    ctx.dtype = x.dtype
                    return x.to(dtype)

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    out = grad
                    if grad.dtype == ctx.dtype:
                        out = grad.detach()
                    else:
                        out = grad.to(ctx.dtype)
                    return out, None
            """,
        ),
        # Gradients only from another module's function, and a saved tensor without
        # history: whether that function is a kernel is not known, and the message says so.
        Invalid(
            """
            import torch
            import fast_norm

            class FastNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    xmat = x.view(-1, w.numel())
                    y, rstd = fast_norm.fwd(xmat, w)
                    ctx.save_for_backward(xmat, w, rstd)
                    return y.view(x.shape)

                @staticmethod
                def backward(ctx, dy):
                    xmat, w, rstd = ctx.saved_tensors
                    dx, dw = fast_norm.bwd(dy.view(xmat.shape), xmat, w, rstd)
                    return dx.view(dy.shape), dw
            """,
            line=13,
            message="computes its gradients with `fast_norm.bwd(...)`, code this check can't see into",
            fixed="""
            import torch
            import fast_norm
            from torch.autograd.function import once_differentiable

            class FastNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    xmat = x.view(-1, w.numel())
                    y, rstd = fast_norm.fwd(xmat, w)
                    ctx.save_for_backward(xmat, w, rstd)
                    return y.view(x.shape)

                @staticmethod
                @once_differentiable
                def backward(ctx, dy):
                    xmat, w, rstd = ctx.saved_tensors
                    dx, dw = fast_norm.bwd(dy.view(xmat.shape), xmat, w, rstd)
                    return dx.view(dy.shape), dw
            """,
        ),
        # A recompute: autograd run inside backward on detached leaf copies; the result
        # also has history through the incoming gradients, but none through the copies.
        Invalid(
            """
            import torch

            class Reroute(torch.autograd.Function):
                @staticmethod
                def forward(ctx, fn, t, y):
                    ctx.fn = fn
                    ctx.save_for_backward(t, y)
                    return t.clone(), y.clone()

                @staticmethod
                def backward(ctx, grad_t, grad_y):
                    t, y = ctx.saved_tensors
                    t = t.detach().clone().requires_grad_(True)
                    with torch.enable_grad():
                        f = ctx.fn(t, y)
                        (dt,) = torch.autograd.grad(f.sum(), t)
                    return None, grad_t, grad_y + dt * grad_t
            """,
            line=11,
            message="autograd run on detached copies of its tensors (made leaves on line 13",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Reroute(torch.autograd.Function):
                @staticmethod
                def forward(ctx, fn, t, y):
                    ctx.fn = fn
                    ctx.save_for_backward(t, y)
                    return t.clone(), y.clone()

                @staticmethod
                @once_differentiable
                def backward(ctx, grad_t, grad_y):
                    t, y = ctx.saved_tensors
                    t = t.detach().clone().requires_grad_(True)
                    with torch.enable_grad():
                        f = ctx.fn(t, y)
                        (dt,) = torch.autograd.grad(f.sum(), t)
                    return None, grad_t, grad_y + dt * grad_t
            """,
        ),
    ]
