"""AGL019: a call-once ctx API is called more than once."""

from __future__ import annotations

from typing import Callable, Iterator

import libcst as cst

from autograd_lint.model import flow
from autograd_lint.model.semantic import Binding, MethodModel
from autograd_lint.model.spec import Kind
from autograd_lint.rules._common import repeated_on_one_path
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

CALL_ONCE_APIS = ("save_for_backward", "save_for_forward", "mark_dirty", "mark_non_differentiable")


def _lost(model: MethodModel, calls: list[cst.Call], api: str, code: Callable[[cst.CSTNode], str],
          non_differentiable: frozenset[Binding]) -> list[str]:
    """The arguments of earlier calls that the last call does not pass again (it replaces
    them); integer and bool tensors count as kept by mark_non_differentiable and
    mark_dirty, as they never get a gradient anyway, and so does a tensor dropped from
    mark_dirty that is also marked non-differentiable (``non_differentiable``: the
    origins of those arguments): re-created on torch 2.13, values and gradients are the
    same, only the returned object is an alias of the input instead of the input."""
    kept = {code(arg.value) for arg in calls[-1].args}
    lost: list[str] = []
    for call in calls[:-1]:
        for arg in call.args:
            text = code(arg.value)
            if text in kept or text in lost:
                continue
            if api in ("mark_non_differentiable", "mark_dirty") and _may_be_integer(model, arg.value):
                continue
            origins = model.origins(arg.value)
            if api == "mark_dirty" and origins and origins <= non_differentiable:
                continue
            lost.append(text)
    return lost


_INTEGER_KINDS = (Kind.INDEX_TENSOR, Kind.OPTIONAL_INDEX_TENSOR)


def _may_be_integer(model: MethodModel, expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` is an integer or bool tensor on some path: its kind says so, or an arm
    of a conditional expression it is bound to does (``m = m.view(s) if p > 0 else
    torch.ones(s, dtype=torch.uint8)``).  Whether the other paths hold integers too syntax
    can't tell, so the rule stays silent."""
    if model.kind(expr) in _INTEGER_KINDS:
        return True
    values: list[cst.BaseExpression] = [expr]
    if isinstance(expr, cst.Name):
        values = [b.value for b in model.reaching(expr) if b.value is not None]
        if any(b.kind in _INTEGER_KINDS for b in model.reaching(expr)):
            return True
    return any(
        isinstance(value, cst.IfExp) and (model.kind(value.body) in _INTEGER_KINDS or model.kind(value.orelse) in _INTEGER_KINDS)
        for value in values
    )


def _marked_non_differentiable(model: MethodModel, ctx_name: str) -> frozenset[Binding]:
    """The bindings whose objects some ``mark_non_differentiable`` call may mark."""
    found: set[Binding] = set()
    for call in model.calls_of(f"{ctx_name}.mark_non_differentiable"):
        for arg in call.args:
            found |= model.origins(arg.value)
    return frozenset(found)


class CallOnceApiRepeated(Rule):
    """Checks that forward (combined style) or setup_context (split style) calls each
    of ``save_for_backward``, ``save_for_forward``, ``mark_dirty`` and
    ``mark_non_differentiable`` at most once on any path: a second call on the same
    path, or a call inside a loop, replaces the first without warning.  Calls in
    mutually exclusive branches are fine; calls made by helpers that receive ctx are
    not followed."""

    code = "AGL019"
    title = "a call-once ctx API is called more than once"
    severity = Severity.WARNING
    why = (
        "The last call wins without warning. `save_for_backward(a); save_for_backward(b)`: "
        "backward sees only `b`, giving a silently wrong gradient or `ValueError: not enough "
        "values to unpack (expected 2, got 1)`. `mark_non_differentiable` twice: the first "
        "output stays `requires_grad=True`. `mark_dirty` twice: the first tensor is treated as "
        "not dirty. `save_for_forward` twice: `ValueError: not enough values to unpack` in jvp."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        split = function.is_split_style
        if split is None:
            return
        # In split style forward takes no ctx: only setup_context can call the APIs.
        name = "setup_context" if split else "forward"
        method = function.methods.get(name)
        if method is None or method.node is None or method.ctx_name is None or method.semantic is None:
            return
        unit = ctx.unit(method)
        if unit is None:
            return
        model = method.semantic
        body = flow.method_body(method.node)
        for api in CALL_ONCE_APIS:
            calls = model.calls_of(f"{method.ctx_name}.{api}")
            if not calls or any(arg.star for call in calls for arg in call.args):
                continue
            found = repeated_on_one_path(body, calls)
            if found is None:
                continue
            second, where = found
            non_differentiable = _marked_non_differentiable(model, method.ctx_name)
            lost = _lost(model, calls, api, unit.code, non_differentiable) if where != "inside a loop" else ["..."]
            if not lost:
                continue  # the last call passes again everything the earlier ones did
            what = "the earlier arguments" if lost == ["..."] else ", ".join(f"`{t}`" for t in lost)
            yield Report(
                ctx.position(method, second),
                f"{function.name}.{name} calls ctx.{api} {where}; only the last call takes "
                f"effect, so {what} {'is' if len(lost) == 1 and lost != ['...'] else 'are'} dropped: "
                "pass everything in one call",
            )

    VALID = [
        # The later call passes the earlier arguments again; an integer index marked
        # twice never needs a gradient anyway.
        Valid(
            """
            import torch

            class TopK(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, k: int):
                    values, indices = torch.topk(x, k)
                    idx = torch.argmax(x, dim=-1)
                    ctx.save_for_backward(indices)
                    ctx.mark_non_differentiable(idx)
                    if k > 1:
                        ctx.save_for_backward(indices, values)
                    ctx.mark_non_differentiable(idx, indices)
                    return values, indices, idx

                @staticmethod
                def backward(ctx, grad, grad_indices, grad_idx):
                    indices, values = ctx.saved_tensors
                    return torch.zeros_like(values).scatter(0, indices, grad), None
            """
        ),
        Valid(
            """
            import torch

            class MulArgmax(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    out = a * b
                    idx = out.argmax()
                    ctx.save_for_backward(a, b)
                    ctx.mark_non_differentiable(idx)
                    return out, idx
            """
        ),
        # A mask that is uint8 on one path and a kernel's output of unknown dtype on the
        # other: syntax can't tell it is ever a floating tensor.
        Valid(
            """
            import torch
            import kernels

            class DropoutAdd(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x: torch.Tensor, y: torch.Tensor, p: float):
                    out, mask_x, mask_y = kernels.dropout_add(x, y, p)
                    mask_x = mask_x.view(x.shape) if p > 0.0 else torch.ones(x.shape, dtype=torch.uint8)
                    mask_y = mask_y.view(y.shape) if p > 0.0 else torch.ones(y.shape, dtype=torch.uint8)
                    ctx.save_for_backward(mask_x, mask_y)
                    ctx.p = p
                    ctx.mark_non_differentiable(mask_x)
                    ctx.mark_non_differentiable(mask_y)
                    return out, mask_x, mask_y

                @staticmethod
                def backward(ctx, grad, grad_mask_x, grad_mask_y):
                    mask_x, mask_y = ctx.saved_tensors
                    scale = 1.0 / (1.0 - ctx.p) if ctx.p > 0.0 else 1.0
                    return grad * mask_x * scale, grad * mask_y * scale, None
            """
        ),
        # An index buffer updated in place and marked dirty, then marked non-differentiable
        # too: the second mark_dirty call drops it, which changes nothing observable.
        Valid(
            """
            import torch

            class Route(torch.autograd.Function):
                @staticmethod
                def forward(ctx, logits: torch.Tensor, slots: torch.Tensor | None, counts: torch.Tensor):
                    probs = logits.softmax(-1)
                    routed = probs.argmax(-1)
                    if slots is not None:
                        slots.copy_(routed)
                        routed = slots
                        ctx.mark_dirty(slots)
                    counts.add_(1)
                    ctx.mark_dirty(counts)
                    ctx.mark_non_differentiable(routed, counts)
                    ctx.save_for_backward(probs)
                    return probs, routed, counts

                @staticmethod
                def backward(ctx, grad, grad_routed, grad_counts):
                    (probs,) = ctx.saved_tensors
                    inner = (grad * probs).sum(-1, keepdim=True)
                    return probs * (grad - inner), None, None
            """
        ),
        # Trap 4: calls in mutually exclusive branches, and after an early return.
        Valid(
            """
            import torch

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, bias):
                    if bias is None:
                        ctx.save_for_backward(x, w)
                        return x @ w
                    elif ctx.needs_input_grad[2]:
                        ctx.save_for_backward(x, w, bias)
                    else:
                        ctx.save_for_backward(x, w, None)
                    return x @ w + bias
            """
        ),
        # Trap 5: split style; forward's first parameter is an input, not ctx.
        Valid(
            """
            import torch

            class Add(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x + y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, y = inputs
                    ctx.save_for_backward(x, y)
                    ctx.save_for_forward(x, y)
            """
        ),
        # Helpers that receive ctx are not followed; nested defs do not run here.
        Valid(
            """
            import torch

            def _save(ctx, *tensors):
                ctx.save_for_backward(*tensors)

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    def later():
                        ctx.save_for_backward(x)

                    y = x.exp()
                    _save(ctx, y)
                    ctx.save_for_backward(y)
                    return y
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a)
                    ctx.save_for_backward(b)
                    return a * b
            """,
            line=7,
            message="Mul.forward calls ctx.save_for_backward 2 times on one path",
        ),
        Invalid(
            """
            import torch

            class Sort(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    values, indices = x.sort()
                    for out in (values, indices):
                        ctx.mark_non_differentiable(out)
                    return values, indices
            """,
            line=8,
            message="calls ctx.mark_non_differentiable inside a loop",
        ),
        Invalid(
            """
            import torch

            class AddInPlace(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x.add_(y), y.mul_(2)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, y = inputs
                    ctx.mark_dirty(x)
                    if y.requires_grad:
                        ctx.mark_dirty(y)
            """,
            line=13,
            message="AddInPlace.setup_context calls ctx.mark_dirty 2 times on one path",
        ),
    ]
