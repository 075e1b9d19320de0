"""AGL009: backward is not correctly double-differentiable but lacks ``@once_differentiable``."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules._double_backward import AddOnceDifferentiable, reports
from autograd_lint.rules.base import FixSafety, FunctionContext, Invalid, Report, Rule, Severity, Valid


class OnceDifferentiable(Rule):
    """Reports a backward (or vjp) without ``@once_differentiable`` whose own torch code
    computes its result from a value without autograd history together with values that
    have it, so that the second derivative is silently wrong: (a) a value cut off from
    autograd (``.detach()``, ``.data``, ``.numpy()``, numpy calls, ``torch.from_numpy``,
    ``.item()``/``.tolist()`` used in arithmetic: as an index or a shape they lose nothing)
    is combined with the incoming gradient or a saved tensor (``grad * w.item()``); (b)
    combined style: forward passes ``save_for_backward`` a name computed from the inputs
    that is neither an input nor returned, and backward computes with it; (c) backward
    reads a ``ctx`` attribute that forward or setup_context set to such a computed tensor
    (cf. AGL032).  Saved integer or bool tensors (ids, masks) and saved values backward
    reads only for a shape are no evidence.

    Where the result comes from code autograd can't see (a Triton or cuTile kernel, a
    compiled extension) or is cut off whole (computed under ``no_grad``, detached), the
    backward is first-order by design and AGL033 reports it instead, naming that code.
    Backwards with a decorator the rule does not know are skipped, as it may apply
    ``once_differentiable``."""

    code = "AGL009"
    title = "backward is not correctly double-differentiable but lacks `@once_differentiable`"
    severity = Severity.WARNING
    fix = FixSafety.UNSAFE  # add @once_differentiable: double backward then raises instead
    fixer = AddOnceDifferentiable
    why = (
        "Double backward is silently wrong: for f(a)=a·sin a at a=1.5 the true f'' is -1.354768, "
        "but a backward using an intermediate saved with save_for_backward, a partly numpy "
        "backward and a tensor kept on ctx all give -1.425505, with no error (rechecked: a "
        "gradient penalty through it is silently wrong too). (A backward whose result has no "
        "history at all is AGL033's.) With `@once_differentiable` the attempt "
        "raises `RuntimeError: trying to differentiate twice a function that was marked with "
        "@once_differentiable`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        yield from reports(ctx, self.code)

    VALID = [
        # A helper that may hand the input itself back (flash-attention's maybe_align):
        # whether the saved value is still the input is not decided.
        Valid(
            """
            import torch

            def maybe_align(x, alignment=16):
                return x if x.data_ptr() % alignment == 0 else x.clone()

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, gamma):
                    gamma = maybe_align(gamma.contiguous())
                    ctx.save_for_backward(x, gamma)
                    return x * gamma

                @staticmethod
                def backward(ctx, grad):
                    x, gamma = ctx.saved_tensors
                    return grad * gamma, grad * x
            """
        ),
        # A 0/1 mask has no derivative to lose: gradgradcheck passes (torch 2.13).
        Valid(
            """
            import torch

            class Relu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    mask = (x > 0).float()
                    ctx.save_for_backward(mask)
                    return x * mask

                @staticmethod
                def backward(ctx, grad):
                    (mask,) = ctx.saved_tensors
                    return grad * mask
            """
        ),
        # A field of an object a library call returns (`packed.meta`: sparsity metadata) is
        # no evidence: its dtype and whether it depends differentiably on the input are unknown.
        Valid(
            """
            import torch
            import sparse_lib

            class Sparsify(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    packed = sparse_lib.compress(x)
                    ctx.meta = packed.meta.clone()
                    return packed

                @staticmethod
                def backward(ctx, grad):
                    values, meta = sparse_lib.compress_like(grad)
                    meta.copy_(ctx.meta)
                    return sparse_lib.Packed(values, meta)
            """
        ),
        # Ids cleaned with masked_fill from an unannotated input that backward gives no
        # gradient: computed only from a constant, they have no derivative to lose.
        Valid(
            """
            import torch

            class TokenLoss(torch.autograd.Function):
                @staticmethod
                def forward(ctx, hidden, weight, labels, ignore_index):
                    keep = labels != ignore_index
                    safe = labels.masked_fill(~keep, 0)
                    logits = hidden @ weight.t()
                    ctx.save_for_backward(hidden, weight, safe, keep)
                    return torch.nn.functional.cross_entropy(logits[keep], safe[keep])

                @staticmethod
                def backward(ctx, grad):
                    hidden, weight, safe, keep = ctx.saved_tensors
                    probs = torch.softmax(hidden @ weight.t(), -1)
                    probs[keep, safe[keep]] -= 1
                    probs = probs * keep.unsqueeze(-1) * grad / keep.sum()
                    return probs @ weight, probs.t() @ hidden, None, None
            """
        ),
        # Saved integer ids and a saved value backward reads only for its shape are no
        # evidence: neither has a derivative to lose.
        Valid(
            """
            import torch

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, target):
                    ids = target.clamp(min=0).long()
                    y = torch.exp(x)
                    ctx.save_for_backward(x, ids, y)
                    return y.gather(-1, ids)

                @staticmethod
                def backward(ctx, g):
                    x, ids, y = ctx.saved_tensors
                    out = torch.zeros(y.shape, dtype=g.dtype)
                    return out.scatter(-1, ids, g) * torch.exp(x), None
            """
        ),
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """
        ),
        # `x.contiguous()` (or `.to()`, `.float()`) is `x` itself when there is nothing to do,
        # so saving it may be saving the input, history and all: not certainly an intermediate.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    x_ = x.contiguous()
                    w_ = w.to(x.dtype)
                    ctx.save_for_backward(x_, w_)
                    return x_ * w_

                @staticmethod
                def backward(ctx, grad):
                    x_, w_ = ctx.saved_tensors
                    return grad * w_, grad * x_
            """
        ),
        # Which binding reaches the `return` decides: a name rebound after a detached use, and a
        # comprehension variable that shares a detached name, carry no taint (gradgradcheck passes).
        Valid(
            """
            import torch

            class Rebind(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    return x * y

                @staticmethod
                def backward(ctx, grad):
                    g = grad.detach()
                    print(g.norm())
                    g = grad * 2
                    outs = [g * 3 for g in (grad, grad)]
                    return g, outs[0]
            """
        ),
        # Trap 8: @once_differentiable, in either order with @staticmethod.
        Valid(
            """
            import numpy as np
            import torch
            from torch.autograd.function import once_differentiable

            class NpSin(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return torch.from_numpy(np.sin(x.numpy()))

                @once_differentiable
                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * torch.from_numpy(np.cos(x.detach().numpy()))
            """
        ),
        # Non-differentiable values used only for indexes, shapes and masks lose nothing;
        # a bool mask saved in forward has no derivative to lose.
        Valid(
            """
            import torch

            class Relu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, k):
                    mask = x > 0
                    ctx.save_for_backward(mask, k)
                    return x.clamp(min=0)

                @staticmethod
                def backward(ctx, grad):
                    mask, k = ctx.saved_tensors
                    n = k.item()
                    positive = grad.detach() > 0
                    out = grad * mask
                    return out.narrow(0, 0, n) * positive, None
            """
        ),
        # Trap 11 and 5: inputs and outputs kept on ctx still have autograd history; the
        # RNG state is no gradient; forward in the base class.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.x, ctx.w = x, w
                    out = x @ w
                    ctx.out = out
                    ctx.rng = torch.get_rng_state()
                    return out

            class MatMul(Base):
                @staticmethod
                def backward(ctx, grad):
                    return grad @ ctx.w.t(), ctx.x.t() @ grad
            """
        ),
        # Trap 3 and 8: *args makes the inputs unknown; an unknown decorator may apply
        # once_differentiable itself.
        Valid(
            """
            import torch
            from mylib import my_once_differentiable

            class Many(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    total = sum(xs).exp()
                    ctx.save_for_backward(total)
                    return total.clone()

                @staticmethod
                def backward(ctx, grad):
                    (total,) = ctx.saved_tensors
                    return grad * total

            class Wrapped(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                @my_once_differentiable
                def backward(ctx, grad):
                    return grad.detach() * 2
            """
        ),
        # A backward whose result a Triton kernel writes is first-order by design: AGL033's.
        Valid(
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
            """
        ),
        # A gradient detached on one path and converted on the other is cut off whole on
        # that path, not mixed with history: AGL033's.
        Valid(
            """
            import torch

            class Identity(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, dtype):
                    ctx.dtype = x.dtype
                    return x.to(dtype)

                @staticmethod
                def backward(ctx, grad):
                    if grad.dtype == ctx.dtype:
                        out = grad.detach()
                    else:
                        out = grad.to(ctx.dtype)
                    return out, None
            """
        ),
    ]
    INVALID = [
        # Gradients an extension (built by cpp_extension.load) computes in forward, saved and
        # scaled by a pure-torch backward (bench/recreate/saved_extension_gradients.py:
        # gradgradcheck fails, silently).
        Invalid(
            """
            import torch
            from torch.utils.cpp_extension import load

            FUSED_CE = load(name="fused_ce", sources=["fused_ce.cpp"])

            class FusedLoss(torch.autograd.Function):
                @staticmethod
                def forward(ctx, hidden, weight):
                    loss, grad_hidden, grad_weight = FUSED_CE.forward(hidden, weight)
                    ctx.save_for_backward(grad_hidden, grad_weight)
                    return loss

                @staticmethod
                def backward(ctx, g):
                    grad_hidden, grad_weight = ctx.saved_tensors
                    return grad_hidden * g, grad_weight * g
            """,
            line=14,
            message="forward saves `grad_hidden`, a tensor computed from the inputs, on line 10",
            fixed="""
            import torch
            from torch.utils.cpp_extension import load
            from torch.autograd.function import once_differentiable

            FUSED_CE = load(name="fused_ce", sources=["fused_ce.cpp"])

            class FusedLoss(torch.autograd.Function):
                @staticmethod
                def forward(ctx, hidden, weight):
                    loss, grad_hidden, grad_weight = FUSED_CE.forward(hidden, weight)
                    ctx.save_for_backward(grad_hidden, grad_weight)
                    return loss

                @staticmethod
                @once_differentiable
                def backward(ctx, g):
                    grad_hidden, grad_weight = ctx.saved_tensors
                    return grad_hidden * g, grad_weight * g
            """,
        ),
        # Through a torch helper of the same file: its math reads the history-less `y`
        # (read by its index in saved_tensors).
        Invalid(
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
                    y = ctx.saved_tensors[0]
                    return _grad_input(grad * 2, y)
            """,
            line=14,
            message="forward saves `y`, a tensor computed from the inputs, on line 10",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            def _grad_input(grad, y):
                return grad * y * (1 - y)

            class Sig(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.sigmoid(x) * 1
                    ctx.save_for_backward(y)
                    return y * 2

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    y = ctx.saved_tensors[0]
                    return _grad_input(grad * 2, y)
            """,
        ),
        # The input's name rebound to a new value before saving: a saved intermediate
        # (gradgradcheck: `Jacobian mismatch for output 0 with respect to input 0`).
        Invalid(
            """
            import torch

            class Sig2(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    x = torch.sigmoid(x)
                    ctx.save_for_backward(x)
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * 2 * x * (1 - x)
            """,
            line=11,
            message="forward saves `x` on line 7, which is no longer the input: line 6 rebinds it",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Sig2(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    x = torch.sigmoid(x)
                    ctx.save_for_backward(x)
                    return x * 2

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * 2 * x * (1 - x)
            """,
        ),
        # (b) an intermediate saved for backward.
        Invalid(
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
            """,
            line=11,
            message="XSinX.backward is not correctly double-differentiable (forward saves `s`",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class XSinX(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a):
                    s = torch.sin(a)
                    ctx.save_for_backward(a, s)
                    return a * s

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    a, s = ctx.saved_tensors
                    return grad * (s + a * torch.cos(a))
            """,
        ),
        # (a) a numpy round trip reaches the gradient.
        Invalid(
            """
            import numpy as np
            import torch
            from torch.autograd import Function

            class NpCos(Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.cos()

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    s = np.sin(x.numpy())
                    return -grad * torch.from_numpy(s)
            """,
            line=12,
            message="its result depends on `np.sin(...)` (numpy) on line 14",
            fixed="""
            import numpy as np
            import torch
            from torch.autograd import Function
            from torch.autograd.function import once_differentiable

            class NpCos(Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.cos()

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    s = np.sin(x.numpy())
                    return -grad * torch.from_numpy(s)
            """,
        ),
        # (c) an intermediate kept on ctx.
        Invalid(
            """
            import torch

            class Softplus(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return torch.log1p(x.exp())

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.sig = torch.sigmoid(x)

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.sig
            """,
            line=14,
            message="it reads ctx.sig, a tensor computed from the inputs in setup_context",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Softplus(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return torch.log1p(x.exp())

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.sig = torch.sigmoid(x)

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    return grad * ctx.sig
            """,
        ),
        # (a) .data, and .item() in arithmetic.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    return grad * w.item(), (grad * x).sum().data
            """,
            line=10,
            message="`.item()` on line 12",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    return grad * w.item(), (grad * x).sum().data
            """,
        ),
        # A tensor computed in forward kept on ctx (a tuple target), read by backward.
        Invalid(
            """
            import torch

            class Normalize(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, eps):
                    ctx.inv, ctx.eps = torch.rsqrt(x.var(-1, keepdim=True) + eps), eps
                    return x * ctx.inv

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.inv, None
            """,
            line=10,
            message="it reads ctx.inv, a tensor computed from the inputs in forward",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Normalize(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, eps):
                    ctx.inv, ctx.eps = torch.rsqrt(x.var(-1, keepdim=True) + eps), eps
                    return x * ctx.inv

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    return grad * ctx.inv, None
            """,
        ),
        # A Python value from `.item()` mixed with the gradient through a local: the result
        # has history through `grad`, but none through `w`.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    g = grad * w.item()
                    return g, None
            """,
            line=10,
            message="its result depends on `.item()` on line 12",
            fixed="""
            import torch
            from torch.autograd.function import once_differentiable

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    g = grad * w.item()
                    return g, None
            """,
        ),
        # Solver outputs kept on ctx, computed with in backward's own torch code (through one
        # plain local), then passed to a helper: the backward computes with values without history.
        Invalid(
            """
            import torch
            from .solver import solve_kkt

            class QP(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, g):
                    z, lams = solve_kkt(q, g)
                    ctx.lams = torch.relu(lams)
                    ctx.save_for_backward(z, q, g)
                    return z

                @staticmethod
                def backward(ctx, dz):
                    z, q, g = ctx.saved_tensors
                    lams = ctx.lams
                    d = torch.clamp(lams, min=1e-8)
                    dq, dg = solve_kkt(q * d, dz)
                    return dq, dg
            """,
            line=13,
            message="it reads ctx.lams, a tensor computed from the inputs in forward",
            fixed="""
            import torch
            from .solver import solve_kkt
            from torch.autograd.function import once_differentiable

            class QP(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, g):
                    z, lams = solve_kkt(q, g)
                    ctx.lams = torch.relu(lams)
                    ctx.save_for_backward(z, q, g)
                    return z

                @staticmethod
                @once_differentiable
                def backward(ctx, dz):
                    z, q, g = ctx.saved_tensors
                    lams = ctx.lams
                    d = torch.clamp(lams, min=1e-8)
                    dq, dg = solve_kkt(q * d, dz)
                    return dq, dg
            """,
        ),
    ]
