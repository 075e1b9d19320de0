"""AGL019: a call-once ctx API is called more than once."""

from __future__ import annotations

from typing import Callable, Iterator

import libcst as cst

from autograd_lint.model import flow
from autograd_lint.model.semantic import MethodModel
from autograd_lint.model.spec import Kind
from autograd_lint.rules._common import repeated_on_one_path
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

CALL_ONCE_APIS = ("save_for_backward", "save_for_forward", "mark_dirty", "mark_non_differentiable")


def _lost(model: MethodModel, calls: list[cst.Call], api: str, code: Callable[[cst.CSTNode], str]) -> list[str]:
    """The arguments of earlier calls that the last call does not pass again (it replaces
    them); integer and bool tensors count as kept by mark_non_differentiable, as they
    never get a gradient anyway."""
    kept = {code(arg.value) for arg in calls[-1].args}
    lost: list[str] = []
    for call in calls[:-1]:
        for arg in call.args:
            text = code(arg.value)
            if text in kept or text in lost:
                continue
            if api in ("mark_non_differentiable", "mark_dirty") and model.kind(arg.value) is Kind.INDEX_TENSOR:
                continue
            lost.append(text)
    return lost


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
            lost = _lost(model, calls, api, unit.code) if where != "inside a loop" else ["..."]
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
