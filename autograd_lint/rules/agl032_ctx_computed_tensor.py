"""AGL032: a tensor computed in forward kept on a ctx attribute, out of sight of saved-tensor hooks."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules._ctx_attributes import Held, Reads, held_text, kept_tensors, target_of
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)


class CtxComputedTensor(Rule):
    """Reports a ``ctx.<attr> = value`` assignment in forward (combined style) or
    setup_context whose value (or an element of whose list, tuple or dict literal) is
    certainly a floating tensor computed there: neither a forward input (nor a view or
    ``.detach()`` of one) nor a forward output (those are AGL003's).

    What follows is minor, hence ``info`` and off by default: forward runs without
    recording, so the tensor has no history either way, and nothing else holds it, so no
    in-place change from outside can touch it.  But ``saved_tensors_hooks`` (activation
    offloading such as ``torch.autograd.graph.save_on_cpu``, checkpointing that packs
    saved tensors) never see a ctx attribute: the tensor stays where it is, as it is, as
    long as the graph lives.  When backward (or vjp/jvp) reads only its metadata
    (``.shape``, ``.dtype``, ``torch.zeros_like(ctx.a)``), the whole tensor is kept alive
    for that metadata alone.

    Left alone: integer and bool tensors; attributes that no reader reads (when every
    reader's code is at hand and none hands ctx to other code); attributes a reader
    deletes, resets to ``None``, clears or writes in place (buffers and caches managed
    by hand); the names in ``allowed_ctx_tensor_attributes``; and a value that is an
    input on some path (``h = h0 if h0 is not None else torch.zeros(n)``)."""

    code = "AGL032"
    title = "computed tensor kept on a ctx attribute, out of sight of saved-tensor hooks"
    severity = Severity.INFO
    enabled_by_default = False
    why = (
        "`saved_tensors_hooks` (activation offloading, checkpointing) see only what "
        "`save_for_backward` saves: a tensor kept on a ctx attribute stays in memory, as it is, "
        "for as long as the graph lives; one kept only for its shape or dtype is held for "
        "nothing more than that."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for kept in kept_tensors(ctx):
            if kept.held is not Held.COMPUTED or kept.reads is Reads.NONE:
                continue
            if kept.reads is Reads.METADATA:
                consequence = (
                    "backward reads only its metadata (shape, dtype, device), yet the whole tensor "
                    "stays alive as long as the graph: keep that metadata on ctx instead"
                )
            else:
                consequence = (
                    "saved-tensor hooks (activation offloading, checkpointing) never see it, so it "
                    "stays in memory as it is for as long as the graph lives: pass it to "
                    "ctx.save_for_backward and read it from ctx.saved_tensors"
                )
            yield Report(
                ctx.position(kept.method, target_of(kept)),
                f"{function.name}.{kept.method.name} keeps {held_text(ctx, kept, 'computed tensor')} "
                f"as ctx.{kept.attribute}; {consequence}",
            )

    VALID = [
        # Inputs and outputs are AGL003's; an index tensor and a tensor saved properly are fine.
        Valid(
            """
            import torch

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, weight: torch.Tensor):
                    y = x @ weight
                    ctx.x = x
                    ctx.y = y
                    ctx.index = torch.argmax(y, dim=-1)
                    scale = y.abs().amax()
                    ctx.save_for_backward(weight, scale)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    weight, scale = ctx.saved_tensors
                    return grad @ weight.t() * scale, ctx.x.t() @ grad * ctx.y.sum()
            """
        ),
        # A buffer backward fills, a cache it deletes or resets to None, and a computed tensor
        # nothing reads.
        Valid(
            """
            import torch

            class Buffered(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor):
                    ctx.buf = torch.empty_like(x)
                    ctx.cache = torch.exp(x)
                    ctx.scale = torch.exp(x)
                    ctx.unused = torch.exp(-x)
                    ctx.save_for_backward(x)
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    ctx.buf.copy_(grad * ctx.scale)
                    del ctx.cache
                    ctx.scale = None
                    return ctx.buf
            """
        ),
        # An optional input, or a zero state made when it is missing: an input on some path.
        Valid(
            """
            import torch

            class Scan(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, h0: torch.Tensor | None = None):
                    h = h0 if h0 is not None else torch.zeros(x.shape[1:])
                    ctx.h = h
                    return x.cumsum(0) + h

                @staticmethod
                def backward(ctx, grad):
                    return grad.flip(0).cumsum(0).flip(0) * ctx.h.sign().abs(), None
            """
        ),
    ]
    INVALID = [
        # A tuple target storing a computed tensor.
        Invalid(
            """
            import torch

            class RMSNorm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, eps: float):
                    v = x.pow(2).mean(-1, keepdim=True)
                    ctx.inv, ctx.eps = torch.rsqrt(v + eps), eps
                    return x * ctx.inv

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.inv, None
            """,
            line=7,
            message="RMSNorm.forward keeps computed tensor `torch.rsqrt(v + eps)` as ctx.inv; saved-tensor hooks",
        ),
        # Solver results computed without history, read in backward (as a local, and from a list).
        Invalid(
            """
            import torch

            class QP(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q: torch.Tensor, p: torch.Tensor):
                    lams = torch.linalg.solve(q, p)
                    zhat = lams * 2
                    ctx.lams = lams
                    ctx.parts = [zhat.clone(), lams.sign()]
                    ctx.save_for_backward(q)
                    return zhat

                @staticmethod
                def backward(ctx, grad):
                    lams = ctx.lams
                    z, s = ctx.parts
                    return grad * lams, grad * z * s
            """,
            line=8,
            message="QP.forward keeps computed tensor `lams` as ctx.lams",
        ),
        # Computed in setup_context.
        Invalid(
            """
            import torch

            class Norm(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x / x.norm()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    (x,) = inputs
                    ctx.norm = torch.linalg.vector_norm(x)
                    ctx.save_for_backward(output)

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return (grad - y * (grad * y).sum()) / ctx.norm
            """,
            line=11,
            message="Norm.setup_context keeps computed tensor `torch.linalg.vector_norm(x)` as ctx.norm",
        ),
        # Kept only for its shape and dtype.
        Invalid(
            """
            import torch

            class Scatter(torch.autograd.Function):
                @staticmethod
                def forward(ctx, src: torch.Tensor, index: torch.LongTensor):
                    out = torch.zeros(int(index.max()) + 1, *src.shape[1:], dtype=src.dtype)
                    out.index_add_(0, index, src)
                    ctx.template = src.clone()
                    ctx.save_for_backward(index)
                    return out

                @staticmethod
                def backward(ctx, grad):
                    (index,) = ctx.saved_tensors
                    grad_src = torch.zeros_like(ctx.template)
                    grad_src.copy_(grad[index])
                    return grad_src, None
            """,
            line=8,
            message="backward reads only its metadata (shape, dtype, device)",
        ),
    ]
