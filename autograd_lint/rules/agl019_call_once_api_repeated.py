"""AGL019: a call-once ctx API is called more than once."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import flow
from autograd_lint.model.exprs import ctx_attribute
from autograd_lint.rules._common import repeated_on_one_path
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid

CALL_ONCE_APIS = ("save_for_backward", "save_for_forward", "mark_dirty", "mark_non_differentiable")


class _ApiCalls(flow.ScopeVisitor):
    """Calls ``<ctx>.<api>(...)`` in text order, outside nested scopes."""

    def __init__(self, ctx_name: str, api: str) -> None:
        self.ctx_name = ctx_name
        self.api = api
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if ctx_attribute(node.func, self.ctx_name) == self.api:
            self.calls.append(node)


class CallOnceApiRepeated(Rule):
    """Checks that forward (combined style) or setup_context (split style) calls each
    of ``save_for_backward``, ``save_for_forward``, ``mark_dirty`` and
    ``mark_non_differentiable`` at most once on any path: a second call on the same
    path, or a call inside a loop, replaces the first without warning.  Calls in
    mutually exclusive branches are fine; calls made by helpers that receive ctx are
    not followed."""

    code = "AGL019"
    title = "a call-once ctx API is called more than once"
    severity = Severity.ERROR
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
        if method is None or method.node is None or method.ctx_name is None or method.is_classmethod:
            return
        if ctx.unit(method) is None:
            return
        body = flow.method_body(method.node)
        for api in CALL_ONCE_APIS:
            if not method.calls(api):
                continue  # the spec already says there is none
            visitor = _ApiCalls(method.ctx_name, api)
            flow.visit_body(method.node, visitor)
            found = repeated_on_one_path(body, visitor.calls)
            if found is None:
                continue
            second, where = found
            yield Report(
                ctx.position(method, second),
                f"{function.name}.{name} calls ctx.{api} {where}; only the last call takes "
                "effect, so pass everything in one call",
            )

    VALID = [
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
