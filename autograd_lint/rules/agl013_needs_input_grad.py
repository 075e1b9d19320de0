"""AGL013: ``needs_input_grad`` index out of range, or gating the wrong gradient."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.exprs import ctx_attribute, is_none
from autograd_lint.model.semantic import Binding, MethodModel
from autograd_lint.rules._common import takes_ctx
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import FunctionSpec, MethodSpec

Guards = frozenset[int]


def _guard_index(node: cst.BaseExpression, ctx_name: str) -> int | None:
    """k for ``<ctx>.needs_input_grad[k]`` with an integer literal k, else None."""
    if not (isinstance(node, cst.Subscript) and len(node.slice) == 1):
        return None
    if ctx_attribute(node.value, ctx_name) != "needs_input_grad":
        return None
    index = node.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
        return int(index.value.value, 0)
    return None


def _guards(test: cst.BaseExpression, ctx_name: str) -> Guards:
    """The indexes k whose ``needs_input_grad[k]`` must be true for ``test`` to hold.

    Only a single subscript or an ``and`` chain counts: with ``or`` (trap 15) no
    single index is necessary, and ``not`` inverts the meaning.
    """
    index = _guard_index(test, ctx_name)
    if index is not None:
        return frozenset({index})
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _guards(test.left, ctx_name) | _guards(test.right, ctx_name)
    return frozenset()


def _enclosing_guards(semantic: MethodModel, node: cst.CSTNode, ctx_name: str) -> Guards:
    """The indexes k whose ``needs_input_grad[k]`` the ``if`` statements around ``node``
    require: those whose body (not ``elif``/``else``) holds it."""
    guards: Guards = frozenset()
    for ancestor, child in semantic.ancestors(node):
        if isinstance(ancestor, cst.If) and child is ancestor.body:
            guards |= _guards(ancestor.test, ctx_name)
    return guards


def _gate(binding: Binding, semantic: MethodModel, ctx_name: str) -> Guards | None:
    """The guards under which ``binding`` makes its name a gradient; None when it binds
    ``None`` (no gradient, whatever the guard)."""
    value = binding.value
    if value is not None and is_none(value):
        return None
    gate = _enclosing_guards(semantic, binding.site, ctx_name)
    if isinstance(value, cst.IfExp) and is_none(value.orelse):
        # `grad_b = expr if ctx.needs_input_grad[1] else None`
        gate = gate | _guards(value.test, ctx_name)
    return gate


def _input_label(function: FunctionSpec, index: int) -> str:
    inputs = function.forward_inputs
    if inputs is not None and index < len(inputs):
        return f"input {index} ({inputs[index].name})"
    return f"input {index}"


class NeedsInputGrad(Rule):
    """Checks the uses of ``ctx.needs_input_grad``.  (a) An integer-literal index must be
    smaller than the number of forward inputs (skipped when forward takes ``*args``, or
    when the Function assigns ``ctx.needs_input_grad`` itself).  (b) In backward/vjp, a
    name whose every non-``None`` binding sits under ``if ctx.needs_input_grad[k]`` (or an
    ``and`` chain holding it, or ``x if ctx.needs_input_grad[k] else None``) must not be
    returned as the gradient of another input j: when only input j requires grad, it is
    ``None``.  Guards joined with ``or`` gate nothing on their own and are not checked."""

    code = "AGL013"
    title = "`needs_input_grad` index out of range, or gating the wrong gradient"
    severity = Severity.ERROR
    why = (
        "(a) An index past the inputs fails in backward: `IndexError: tuple index out of "
        "range`. (b) A gradient gated on another input's flag is silently missing: `b.grad is "
        "None` when only `b` requires grad and its gradient is gated on `needs_input_grad[0]`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        yield from self._out_of_range(ctx)
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is not None and ctx.own(method) and ctx.unit(method) is not None:
                yield from self._wrong_gate(ctx, method)

    def _out_of_range(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        n_inputs = function.n_inputs
        if n_inputs is None:
            return
        if any(w.attribute == "needs_input_grad" for m in function.effective_methods.values() for w in m.ctx_writes):
            return  # the Function rebinds the flags (e.g. drops a trailing input): indexes shift
        for name, method in function.methods.items():
            if not takes_ctx(function, name) or method.is_classmethod:
                continue
            for read in method.reads("needs_input_grad[]"):
                if read.index is not None and read.index >= n_inputs:
                    yield Report(
                        read.position,
                        f"{function.name}.{name} reads ctx.needs_input_grad[{read.index}], but "
                        f"forward takes {n_inputs} input{'s' if n_inputs != 1 else ''} "
                        f"(indexes 0 to {n_inputs - 1})",
                    )

    def _wrong_gate(self, ctx: FunctionContext, method: MethodSpec) -> Iterator[Report]:
        node, ctx_name, semantic = method.node, method.ctx_name, method.semantic
        if node is None or ctx_name is None or semantic is None or method.is_classmethod:
            return
        if not method.reads("needs_input_grad[]"):
            return
        for ret in semantic.returns:
            if ret.elements is None:
                continue
            outer = _enclosing_guards(semantic, ret.node, ctx_name)
            for j, element in enumerate(ret.elements):
                if not isinstance(element, cst.Name):
                    continue
                gates = [
                    gate for b in semantic.unnarrowed(semantic.reaching(element))
                    if (gate := _gate(b, semantic, ctx_name)) is not None
                ]
                # A return reached only when another input needs grad is not reached
                # when input j alone does.
                if not gates or not outer <= {j}:
                    continue
                if all(g - {j} for g in gates):
                    k = min(set.intersection(*(set(g) for g in gates)) - {j}, default=None)
                    flag = f"ctx.needs_input_grad[{k}]" if k is not None else "other inputs' needs_input_grad"
                    yield Report(
                        ctx.position(method, ret.node),
                        f"{ctx.function.name}.{method.name} returns {element.value} as the gradient "
                        f"of {_input_label(ctx.function, j)}, but computes it only when {flag} "
                        f"is true; it is missing when only input {j} requires grad",
                        Severity.WARNING,  # a silently missing gradient: nothing raises
                    )

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    grad_a = grad_b = None
                    if ctx.needs_input_grad[0]:
                        grad_a = grad * b
                    if ctx.needs_input_grad[1]:
                        grad_b = grad * a
                    return grad_a, grad_b
            """
        ),
        # Trap 15: one guard shared by two gradients, joined with `or`.
        Valid(
            """
            import torch

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x @ w.t()

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    grad_x = grad_w = None
                    if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
                        grad_x = grad @ w
                        grad_w = grad.t() @ x
                    return grad_x, grad_w
            """
        ),
        # Trap 3: *args makes the input count unknown, so no index is out of range.
        Valid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    ctx.n = len(xs)
                    return sum(xs)

                @staticmethod
                def backward(ctx, grad):
                    first = grad if ctx.needs_input_grad[2] else None
                    return (first,) + (grad,) * (ctx.n - 1)
            """
        ),
        # Trap 5 and 9: split style counts every forward parameter; ctx is not called ctx;
        # the conditional expression gates each gradient on its own flag.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(a, b, c):
                    return a * b + c

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0], inputs[1])

            class Fma(Base):
                @staticmethod
                def backward(self, grad):
                    a, b = self.saved_tensors
                    grad_a = grad * b if self.needs_input_grad[0] else None
                    grad_b = grad * a if self.needs_input_grad[1] else None
                    grad_c = grad if self.needs_input_grad[2] else None
                    return grad_a, grad_b, grad_c
            """
        ),
        # A name also bound outside the guard is not gated; a return reached only under
        # another input's flag is not reached when input 1 alone needs grad.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, s):
                    ctx.save_for_backward(x, s)
                    return x * s

                @staticmethod
                def backward(ctx, grad):
                    x, s = ctx.saved_tensors
                    grad_s = (grad * x).sum()
                    if ctx.needs_input_grad[0]:
                        grad_x = grad * s
                        grad_s = grad_s * 1
                        return grad_x, grad_s
                    return None, grad_s
            """
        ),
    ]
    INVALID = [
        # (b) the second gradient is gated on the first input's flag.
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    grad_a = grad_b = None
                    if ctx.needs_input_grad[0]:
                        grad_a = grad * b
                    if ctx.needs_input_grad[0]:
                        grad_b = grad * a
                    return grad_a, grad_b
            """,
            line=17,
            message="returns grad_b as the gradient of input 1 (b), but computes it only when "
            "ctx.needs_input_grad[0] is true",
        ),
        # (a) three inputs, so index 3 is out of range.
        Invalid(
            """
            from torch.autograd import Function

            class Fma(Function):
                @staticmethod
                def forward(ctx, a, b, c):
                    ctx.save_for_backward(a, b)
                    return a * b + c

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    grad_c = grad if ctx.needs_input_grad[3] else None
                    return grad * b, grad * a, grad_c
            """,
            line=12,
            message="Fma.backward reads ctx.needs_input_grad[3], but forward takes 3 inputs (indexes 0 to 2)",
        ),
        # (a) split style: forward has no ctx, both parameters are inputs.
        Invalid(
            """
            import torch

            class Add(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x + y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.flags = (ctx.needs_input_grad[0], ctx.needs_input_grad[2])

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """,
            line=10,
            message="Add.setup_context reads ctx.needs_input_grad[2], but forward takes 2 inputs",
        ),
        # (b) through a conditional expression and an `and` chain.
        Invalid(
            """
            import torch

            class Lerp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, w):
                    ctx.save_for_backward(w)
                    return a + w * (b - a)

                @staticmethod
                def backward(ctx, grad):
                    (w,) = ctx.saved_tensors
                    grad_a = grad * (1 - w) if ctx.needs_input_grad[0] else None
                    grad_b = None
                    if w is not None and ctx.needs_input_grad[0]:
                        grad_b = grad * w
                    return grad_a, grad_b, None
            """,
            line=16,
            message="returns grad_b as the gradient of input 1 (b)",
        ),
        # A gradient computed inline comes first: the wrongly gated name after it is still read.
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    grad_b = None
                    if ctx.needs_input_grad[0]:
                        grad_b = grad * a
                    return grad * b, grad_b
            """,
            line=15,
            message="Mul.backward returns grad_b as the gradient of input 1 (b), but computes it only when "
            "ctx.needs_input_grad[0] is true",
        ),
        # The name is also bound without a guard, but on a path that returns before this `return`.
        Invalid(
            """
            import torch

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, fast: bool):
                    ctx.fast = fast
                    ctx.save_for_backward(x, w)
                    return x @ w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    if ctx.fast:
                        g = grad @ w.t()
                        return g, None, None
                    g = None
                    if ctx.needs_input_grad[0]:
                        g = x.t() @ grad
                    return None, g, None
            """,
            line=19,
            message="Linear.backward returns g as the gradient of input 1 (w), but computes it only when ctx.needs_input_grad[0] is true",
        ),
    ]

