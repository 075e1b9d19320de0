"""AGL003: a forward input or output stored as a ctx attribute instead of through ``save_for_backward``."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules._ctx_attributes import Held, Kept, Reads, held_text, kept_tensors, target_of
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)

# Methods and attributes that always give a view; and those that give the tensor itself,
# a view or a copy, depending on its layout.
_VIEWS = frozenset({"view", "t", "transpose", "expand", "squeeze", "unsqueeze", "T", "mT", "H", "mH"})
_MAYBE_VIEWS = frozenset({"reshape", "flatten", "contiguous"})


def _cycle(kept: Kept) -> str:
    """The reference cycle a kept output makes (checked on torch 2.13: a view made in
    forward holds the output as its base, out of sight of the garbage collector)."""
    through = kept.sources.through
    if not through & (_VIEWS | _MAYBE_VIEWS):
        return (
            "a forward output kept on ctx makes a reference cycle: it is freed only by "
            "gc.collect(), and never once ctx holds two outputs"
        )
    if not through & _MAYBE_VIEWS and len(kept.sources.bindings) == 1:
        return (
            "a view of a forward output kept on ctx holds the output as its base: a reference "
            "cycle that not even gc.collect() frees"
        )
    return (
        "a forward output (or a view of it) kept on ctx makes a reference cycle: freed by "
        "gc.collect() at best, never when ctx holds a view of it or two outputs"
    )


class CtxTensorAttribute(Rule):
    """Reports a ``ctx.<attr> = value`` assignment in forward (combined style) or
    setup_context whose value (or an element of whose list, tuple or dict literal) is
    certainly a floating tensor, and is

    - a forward **output**, or a view of one: ctx and the output then make a reference
      cycle (freed only by ``gc.collect()``, and never once ctx holds two outputs; with a
      view, never: the view holds the output as its base, out of the collector's sight); an
      input forward returns counts as an output only when it is marked dirty (else
      autograd hands out a new alias of it, and ctx holds the input); or a
      ``.detach()`` of an output that backward reads: an in-place change to the output
      before backward goes unnoticed;
    - a forward **input**, or a view or ``.detach()`` of one, that backward (or vjp/jvp)
      reads beyond its metadata and whose gradient backward may compute (some ``return``
      has something other than ``None`` at its position): an in-place change to that
      input before backward gives a silently wrong gradient, where ``save_for_backward``
      raises.

    Left alone: integer and bool tensors (ids, masks, ``cu_seqlens``); inputs backward
    gives no gradient (``None`` at their position in every ``return``: index metadata,
    frozen weights, loss weights, hyperparameter tensors, buffers), which are constants to
    this Function that the caller holds anyway; inputs backward reads only for their
    metadata (``.shape``, ``.dtype``, ``torch.zeros_like(ctx.a)``, ``ctx.a is None``);
    attributes that backward/vjp/jvp deletes, resets to ``None``, clears or writes in
    place (buffers and caches managed by hand); and the names in
    ``allowed_ctx_tensor_attributes``.  Tensors computed in forward (neither inputs nor
    outputs) are AGL032's, off by default: keeping them on ctx only hides them from
    saved-tensor hooks.

    Where it can't be told, the rule stays silent: when no ``return`` of backward can be
    split by position (``return grads``, ``return helper(ctx, g)``), nothing shows whether
    the input gets a gradient; when backward hands ctx to other code and reads the
    attribute nowhere itself, nothing shows how it is read."""

    code = "AGL003"
    title = "forward input or output stored as a ctx attribute instead of save_for_backward"
    severity = Severity.WARNING
    why = (
        "An input kept on ctx and modified in place after forward gives a silently wrong "
        "gradient (save_for_backward would raise `one of the variables needed for gradient "
        "computation has been modified by an inplace operation`); an output on ctx makes a "
        "reference cycle that keeps it alive until `gc.collect()` (and for ever once ctx holds "
        "two outputs: `gc.collect()` does not free them); `saved_tensors_hooks` (checkpointing, "
        "offloading) never see either."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for kept in kept_tensors(ctx):
            if kept.held is Held.OUTPUT:
                consequence = _cycle(kept)
            elif kept.held is Held.DETACHED_OUTPUT and kept.reads is Reads.DATA:
                consequence = (
                    "it shares the forward output's data, so an in-place change to that output "
                    "before backward gives a silently wrong gradient"
                )
            elif kept.held is Held.GRADED_INPUT and kept.reads is Reads.DATA:
                consequence = "an in-place change to that input before backward gives a silently wrong gradient"
            else:
                continue
            yield Report(
                ctx.position(kept.method, target_of(kept)),
                f"{function.name}.{kept.method.name} stores {held_text(ctx, kept)} as ctx.{kept.attribute}; "
                f"{consequence}: pass it to ctx.save_for_backward and read it from ctx.saved_tensors",
            )

    VALID = [
        # A backward returning too few gradients (AGL001's) says nothing about which input
        # is a tensor: `dq` lands on `group`, a process group (long-context-attention
        # RingAttentionFunc).
        Valid(
            """
            import torch

            class RingAttention(torch.autograd.Function):
                @staticmethod
                def forward(ctx, group, q, k, sm_scale):
                    out = q * k * sm_scale
                    ctx.save_for_backward(q, k)
                    ctx.group = group
                    return out

                @staticmethod
                def backward(ctx, dout):
                    q, k = ctx.saved_tensors
                    handle = exchange(dout, ctx.group)
                    return dout * k, dout * q, None
            """
        ),
        # Built by appends, the gradients give `w` None in every branch: a constant here.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, w: torch.Tensor):
                    ctx.w = w
                    return x * w

                @staticmethod
                def backward(ctx, g):
                    results = []
                    if ctx.needs_input_grad[0]:
                        results.append(g * ctx.w)
                    else:
                        results.append(None)
                    results.append(None)
                    return tuple(results)
            """
        ),
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b: float):
                    ctx.save_for_backward(a)
                    ctx.b = b
                    ctx.shape = a.shape
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    (a,) = ctx.saved_tensors
                    return grad * ctx.b, None
            """
        ),
        # Trap 11: RNG state, callables and dtypes on ctx are not saved tensors.
        Valid(
            """
            import torch

            class Checkpoint(torch.autograd.Function):
                @staticmethod
                def forward(ctx, run_function, x):
                    ctx.run_function = run_function
                    ctx.fwd_cpu_state = torch.get_rng_state()
                    ctx.dtype = x.dtype
                    ctx.save_for_backward(x)
                    return run_function(x)

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return None, grad
            """
        ),
        # Trap 11: a list of tensors cleared in backward, and a buffer backward writes into.
        Valid(
            """
            import torch

            class Cached(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.exp(x)
                    ctx.cache = [y, torch.sigmoid(x)]
                    ctx.grad_buf = torch.empty_like(x)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    y, s = ctx.cache
                    del ctx.cache
                    buf = ctx.grad_buf
                    buf.copy_(grad * y * s)
                    return buf
            """
        ),
        # Trap 11: a handle object and a comparison result (maybe a bool) are not
        # certainly tensors.
        Valid(
            """
            import torch

            class Handle(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, handle):
                    ctx.handle = handle
                    ctx.mask = x > 0
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.mask, None
            """
        ),
        # Split style: forward takes no ctx, so `x.cache = ...` there is not a ctx write.
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    x.tag = torch.zeros(1)
                    return x + y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(*inputs)

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """
        ),
        # The int branch of a union of int and Tensor stores an int; a process group has
        # `.size()` but is no tensor; integer masks and indices are deliberate.
        Valid(
            """
            from typing import Union

            import torch
            import torch.distributed as dist

            class Shift(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, offset: Union[int, torch.Tensor], group):
                    if isinstance(offset, int):
                        ctx.offset = offset
                    else:
                        ctx.save_for_backward(offset)
                    ctx.group = group
                    ctx.world = group.size()
                    ctx.mask = x > 0
                    ctx.index = torch.argmax(x, dim=-1)
                    return x + offset

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.mask, None, None
            """
        ),
        # Index metadata (annotated `torch.LongTensor | None`, or plain `Tensor` but given no
        # gradient), ids cleaned with masked_fill, and a frozen weight backward only reads:
        # constants to this Function.
        Valid(
            """
            import torch

            class VarlenScale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, frozen_w: torch.Tensor, ids: torch.LongTensor,
                            cu_seqlens: torch.LongTensor | None = None,
                            chunk_offsets: torch.Tensor | None = None, class_w=None):
                    ctx.save_for_backward(x)
                    ctx.w = frozen_w.contiguous()
                    ctx.ids = ids.masked_fill(ids < 0, 0)
                    ctx.cu_seqlens = cu_seqlens
                    ctx.chunk_offsets = chunk_offsets
                    ctx.class_w = class_w.detach() if class_w is not None else None
                    return x @ frozen_w

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad @ ctx.w.t(), *[None] * 5
            """
        ),
        # Process-group plumbing: backward's `(None, None) + (g,)` gives no gradient to
        # `op` or `group`, however it is spelled.
        Valid(
            """
            import torch
            from torch.autograd import Function

            class AllReduce(Function):
                @staticmethod
                def forward(ctx, op, group, tensor):
                    ctx.group = group
                    ctx.op = op
                    return tensor.clone()

                @staticmethod
                def backward(ctx, grad_output):
                    return (None, None) + (AllReduce.apply(ctx.op, ctx.group, grad_output),)
            """
        ),
        # A loop rebinds `state` to a plain number before it is stored.
        Valid(
            """
            import torch

            class Steps(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, n: int):
                    state = x.sum()
                    for step in range(n):
                        state = step * 2
                    ctx.state = state
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2, None
            """
        ),
        # Inputs backward gives no gradient (None at their position): a frozen weight and
        # its scale, and a hyperparameter tensor made from a number when the caller passes
        # one, expanded.  Constants to this Function: the caller holds them anyway.
        Valid(
            """
            import torch

            class FrozenLinear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, scale, budget=2.0):
                    if not isinstance(budget, torch.Tensor):
                        budget = torch.tensor(budget, dtype=x.dtype)
                    budget = budget.expand(x.shape[0], 1)
                    ctx.weight = weight
                    ctx.scale = scale.T
                    ctx.budget = budget
                    return (x @ (weight * scale).t()).clamp(max=budget)

                @staticmethod
                def backward(ctx, grad):
                    w = ctx.weight * ctx.scale.T
                    return (grad * (grad < ctx.budget)) @ w, None, None, None
            """
        ),
        # An empty-input path keeps the inputs only for their shapes: backward reads their
        # metadata (zeros_like, `is None`), never their data.
        Valid(
            """
            import torch

            class MatMul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None):
                    ctx.is_empty = a.numel() == 0
                    if ctx.is_empty:
                        ctx.a, ctx.b, ctx.bias = a, b, bias
                        return a.new_empty(a.shape[:-1] + b.shape[1:])
                    ctx.save_for_backward(a, b)
                    return a @ b if bias is None else a @ b + bias

                @staticmethod
                def backward(ctx, grad):
                    if ctx.is_empty:
                        grad_bias = None if ctx.bias is None else torch.zeros_like(ctx.bias)
                        return torch.zeros_like(ctx.a), ctx.b.new_zeros(ctx.b.shape), grad_bias
                    a, b = ctx.saved_tensors
                    return grad @ b.t(), a.t() @ grad, grad.sum(0)
            """
        ),
        # A tensor computed in forward (neither an input nor an output) is AGL032's, off by
        # default; and the element of a container backward does not use is not read.
        Valid(
            """
            import torch

            class Solve(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q: torch.Tensor, p: torch.Tensor):
                    with torch.no_grad():
                        lams = torch.linalg.solve(q, p)
                    ctx.lams = lams
                    ctx.pair = (torch.linalg.inv(q), q)
                    return lams.sum(-1)

                @staticmethod
                def backward(ctx, grad):
                    inv, _q = ctx.pair
                    return grad * ctx.lams * inv.sum(), grad * inv.sum(0)
            """
        ),
        # Backward's gradients come from a helper: nothing shows whether `bias` gets one
        # (undecidable, so silent).
        Valid(
            """
            import torch

            class Fused(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
                    ctx.save_for_backward(x, weight)
                    ctx.bias = bias.detach() if bias is not None else None
                    return x @ weight.t() + (0 if bias is None else bias)

                @staticmethod
                def backward(ctx, grad):
                    return fused_backward(ctx, grad)
            """
        ),
        # An assignment expression (walrus) in forward.
        Valid(
            """
            import torch

            class Norm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    if (n := x.norm()) == 0:
                        raise ValueError(f"zero norm for shape {tuple(x.shape)}")
                    ctx.save_for_backward(x)
                    return x / n

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    n = x.norm()
                    return grad / n - x * (grad * x).sum() / n**3
            """,
        ),
        # PEP 701 f-strings (same quotes nested, Python 3.12+) beside the saved output.
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    ctx.note = f"{"exp"!r} of {"x".join(map(str, x.shape))}"
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """,
            min_python=(3, 12),
        ),
    ]
    INVALID = [
        # The gradients are a tuple no literal spells: position 1 (`w`) gets one.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, w: torch.Tensor):
                    ctx.save_for_backward(x)
                    ctx.w = w
                    return x * w

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    results = [g * ctx.w]
                    results.append((g * x).sum())
                    return tuple(results)
            """,
            line=7,
            message="Scale.forward stores tensor `w` as ctx.w; an in-place change to that input",
        ),
        # An extension's output list kept on ctx holds the returned tensor (torch 2.13: the
        # output outlives `del` until gc.collect()).
        Invalid(
            """
            import torch
            import my_cuda

            class Op(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    outputs = my_cuda.forward(x)
                    ctx.outputs = outputs
                    return outputs[0]

                @staticmethod
                def backward(ctx, grad):
                    return my_cuda.backward(grad, *ctx.outputs)
            """,
            line=8,
            message="Op.forward stores tensor `outputs` as ctx.outputs; a forward output kept on ctx makes a reference cycle",
        ),
        # `setattr(ctx, "y", y)` is `ctx.y = y`.
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    setattr(ctx, "y", y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.y
            """,
            line=7,
            message="Exp.forward stores tensor `y` as ctx.y; a forward output kept on ctx makes a reference cycle",
        ),
        # An optional float state whose gradient backward computes is no constant.
        Invalid(
            """
            import torch

            class Scan(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, cu_seqlens: torch.LongTensor | None = None,
                            h0: torch.Tensor | None = None):
                    ctx.cu_seqlens = cu_seqlens
                    ctx.h0 = h0
                    ctx.save_for_backward(x)
                    return x.cumsum(0) if h0 is None else x.cumsum(0) + h0.tanh()

                @staticmethod
                def backward(ctx, grad):
                    dh0 = None if ctx.h0 is None else grad.sum(0) * (1 - ctx.h0.tanh() ** 2)
                    return grad.flip(0).cumsum(0).flip(0), None, dh0
            """,
            line=8,
            message="stores `h0` (a tensor or None) as ctx.h0",
        ),
        # An unannotated input (named `input`), with a once_differentiable backward: backward's
        # gradient for it shows it is a tensor.
        Invalid(
            """
            import torch
            from torch.autograd.function import once_differentiable

            class Clamp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, input, low, high):
                    ctx.input = input
                    ctx.low, ctx.high = low, high
                    return input.clamp(low, high)

                @staticmethod
                @once_differentiable
                def backward(ctx, grad):
                    mask = (ctx.input >= ctx.low) & (ctx.input <= ctx.high)
                    return grad * mask, None, None
            """,
            line=7,
            message="stores tensor `input` as ctx.input; an in-place change to that input",
        ),
        # A dict literal of input tensors.
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: torch.Tensor, b: torch.Tensor):
                    ctx.inputs = {"a": a, "b": b}
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.inputs["b"], grad * ctx.inputs["a"]
            """,
            line=6,
            message="stores a container holding tensor `a` as ctx.inputs",
        ),
        # The forward output kept on ctx in setup_context: a reference cycle.
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x: torch.Tensor):
                    return x.exp()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.out = output

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.out
            """,
            line=10,
            message="a forward output kept on ctx makes a reference cycle",
        ),
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = torch.exp(x)
                    ctx.y = y
                    return y

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.y
            """,
            line=7,
            message="Exp.forward stores tensor `y` as ctx.y",
        ),
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: torch.Tensor, b: torch.Tensor):
                    ctx.a, ctx.b = a, b
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.b, grad * ctx.a
            """,
            line=6,
            message="Mul.forward stores tensor `a` as ctx.a",
        ),
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x * y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, y = inputs
                    ctx.saved = [x.detach(), y.detach()]

                @staticmethod
                def backward(ctx, grad):
                    x, y = ctx.saved
                    return grad * y, grad * x
            """,
            line=11,
            message="Pair.setup_context stores a container holding tensor `x.detach()` as ctx.saved",
        ),
        # An unannotated input, kept on ctx, whose gradient backward computes.
        Invalid(
            """
            import torch

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.x = x
                    ctx.save_for_backward(weight)
                    return x @ weight

                @staticmethod
                def backward(ctx, grad):
                    (weight,) = ctx.saved_tensors
                    return grad @ weight.t(), ctx.x.t() @ grad
            """,
            line=6,
            message="Linear.forward stores tensor `x` as ctx.x; an in-place change to that input",
        ),
        # An input made a tensor when the caller passes a number, then expanded: a view of
        # the input (when it is one) whose gradient backward computes.
        Invalid(
            """
            import torch

            class Power(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, alpha=1.5):
                    if not isinstance(alpha, torch.Tensor):
                        alpha = torch.tensor(alpha, dtype=x.dtype)
                    alpha = alpha.expand(*x.shape)
                    ctx.alpha = alpha
                    y = x.clamp(min=0) ** alpha
                    ctx.save_for_backward(x, y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    x, y = ctx.saved_tensors
                    dx = grad * ctx.alpha * x.clamp(min=0) ** (ctx.alpha - 1)
                    dalpha = (grad * y * x.clamp(min=1e-12).log()).sum()
                    return dx, dalpha
            """,
            line=9,
            message="Power.forward stores tensor `alpha` as ctx.alpha",
        ),
        # Inputs kept in a tuple with an index tensor; backward unpacks it.
        Invalid(
            """
            import torch

            class IndexMul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: torch.Tensor, b: torch.Tensor, idx: torch.LongTensor):
                    ctx.for_backwards = (a, b, idx)
                    return a[idx] * b

                @staticmethod
                def backward(ctx, grad):
                    a, b, idx = ctx.for_backwards
                    grad_a = torch.zeros_like(a).index_add_(0, idx, grad * b)
                    return grad_a, grad * a[idx], None
            """,
            line=6,
            message="IndexMul.forward stores a container holding tensor `a` as ctx.for_backwards",
        ),
        # A detached optional bias whose gradient backward computes, read through a local.
        Invalid(
            """
            import torch

            class Affine(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, bias: torch.Tensor | None):
                    ctx.bias = bias.detach() if bias is not None else None
                    return x.exp() + (0 if bias is None else bias.exp())

                @staticmethod
                def backward(ctx, grad):
                    bias = ctx.bias
                    grad_bias = None
                    if bias is not None:
                        grad_bias = grad.sum(0) * bias.exp()
                    return grad, grad_bias
            """,
            line=6,
            message="`bias.detach() if bias is not None else None` (a tensor or None) as ctx.bias",
        ),
        # A detached forward output backward reads: no reference cycle, but an in-place
        # change to the output goes unnoticed.
        Invalid(
            """
            import torch

            class Sigmoid(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor):
                    y = torch.sigmoid(x)
                    ctx.y = y.detach()
                    return y

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.y * (1 - ctx.y)
            """,
            line=7,
            message="it shares the forward output's data",
        ),
        # One input: whatever backward returns is its gradient, even from a kernel call.
        Invalid(
            """
            import torch

            class Act(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.x = x
                    return act_forward(x)

                @staticmethod
                def backward(ctx, grad):
                    return act_backward(ctx.x, grad)
            """,
            line=6,
            message="Act.forward stores tensor `x` as ctx.x",
        ),
        # An input forward returns as it is: autograd hands out a new alias of it, so ctx
        # holds the input, not the output (no cycle; checked on torch 2.13).
        Invalid(
            """
            import torch

            class Identity(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor):
                    ctx.x = x
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.x.sign().abs()
            """,
            line=6,
            message="Identity.forward stores tensor `x` as ctx.x; an in-place change to that input",
        ),
        # An input written in place and marked dirty is the output object itself: a cycle.
        Invalid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor):
                    x.mul_(2)
                    ctx.mark_dirty(x)
                    ctx.x = x
                    return x

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """,
            line=8,
            message="Double.forward stores tensor `x` as ctx.x; a forward output kept on ctx makes a reference cycle",
        ),
        # A view of the forward output: its base is the output, and gc.collect() never
        # frees the pair (checked on torch 2.13).
        Invalid(
            """
            import torch

            class Exp2d(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor):
                    y = x.exp()
                    ctx.flat = y.view(-1)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.flat.view_as(grad)
            """,
            line=7,
            message="a view of a forward output kept on ctx holds the output as its base",
        ),
        # An assignment expression (walrus) in forward does not hide the stored input.
        Invalid(
            """
            import torch

            class Norm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    if (n := x.norm()) == 0:
                        raise ValueError(f"zero norm for shape {tuple(x.shape)}")
                    ctx.x = x
                    return x / n

                @staticmethod
                def backward(ctx, grad):
                    x = ctx.x
                    n = x.norm()
                    return grad / n - x * (grad * x).sum() / n**3
            """,
            line=8,
            message="Norm.forward stores tensor `x` as ctx.x",
        ),
        # PEP 701 f-strings (same quotes nested, Python 3.12+) beside the stored output.
        Invalid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.y = y
                    ctx.note = f"{"exp"!r} of {"x".join(map(str, x.shape))}"
                    return y

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.y
            """,
            line=7,
            message="Exp.forward stores tensor `y` as ctx.y",
            min_python=(3, 12),
        ),
    ]

