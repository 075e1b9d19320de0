"""AGL034: a gradient bound only under a ``needs_input_grad`` guard is returned unguarded."""

from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from autograd_lint.model import flow
from autograd_lint.model.semantic import target_names
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


class _Binds(cst.CSTVisitor):
    """The names a statement binds anywhere inside it (nested scopes excluded)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.names.update(target_names(target.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.names.update(target_names(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.names.update(target_names(node.target))

    def visit_For(self, node: cst.For) -> None:
        self.names.update(target_names(node.target))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self.names.update(target_names(node.asname.name))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.names.update(target_names(node.target))

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self.names.update(target_names(node.name.name))

    def visit_Import(self, node: cst.Import) -> None:
        self.names.update("*")  # anything may be bound: undecided

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.names.update("*")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Global(self, node: cst.Global) -> None:
        self.names.update("*")

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.names.update("*")


def _binds(node: cst.CSTNode) -> set[str]:
    visitor = _Binds()
    node.visit(visitor)
    return visitor.names


def _guard_index(test: cst.BaseExpression, ctx_name: str, flags: dict[str, int]) -> int | None:
    """``i`` when ``test`` is exactly ``<ctx>.needs_input_grad[i]`` (or a name bound to
    that flag): false whenever input ``i`` does not require grad."""
    if isinstance(test, cst.Name):
        return flags.get(test.value)
    if (
        isinstance(test, cst.Subscript)
        and isinstance(test.value, cst.Attribute)
        and test.value.attr.value == "needs_input_grad"
        and isinstance(test.value.value, cst.Name)
        and test.value.value.value == ctx_name
        and len(test.slice) == 1
        and isinstance(test.slice[0].slice, cst.Index)
        and isinstance(test.slice[0].slice.value, cst.Integer)
    ):
        index = test.slice[0].slice.value.evaluated_value
        return index if isinstance(index, int) else None
    return None


def _flag_names(body: Sequence[cst.BaseStatement], ctx_name: str) -> dict[str, int]:
    """Names bound once, at the top of the body, to ``ctx.needs_input_grad`` flags:
    ``a, b = ctx.needs_input_grad`` and ``a = ctx.needs_input_grad[0]``."""
    flags: dict[str, int] = {}
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                continue
            target, value = small.targets[0].target, small.value
            index = _guard_index(value, ctx_name, {})
            if isinstance(target, cst.Name) and index is not None:
                flags[target.value] = index
            elif (
                isinstance(target, (cst.Tuple, cst.List))
                and isinstance(value, cst.Attribute)
                and value.attr.value == "needs_input_grad"
                and isinstance(value.value, cst.Name)
                and value.value.value == ctx_name
            ):
                for position, element in enumerate(target.elements):
                    if isinstance(element.value, cst.Name):
                        flags[element.value.value] = position
    # A name bound twice is not a flag one can trust.
    bound_twice = {name for name in flags if sum(name in _binds(s) for s in body) > 1}
    return {name: index for name, index in flags.items() if name not in bound_twice}


class GuardedGradientUnbound(Rule):
    """Reports a gradient that backward binds only inside ``if ctx.needs_input_grad[i]:``
    (with no ``else`` that binds it, and no binding before) but returns unconditionally:
    when input ``i`` does not require grad while another input does, the name was never
    bound.  Decided only for a backward with one ``return``, at its top level, that
    returns the bare name; a guard that is exactly one flag (``ctx.needs_input_grad[i]``
    or a name unpacked from ``ctx.needs_input_grad``); and a Function with two inputs or
    more (with one, the flag is true whenever backward runs)."""

    code = "AGL034"
    title = "a gradient bound only under a needs_input_grad guard is returned unguarded"
    severity = Severity.ERROR
    why = (
        "Measured on torch 2.13 (bench/recreate/issue23_messages.py): `Linear.apply(x, w)` with `x` not "
        "requiring grad and `w` requiring it: backward raises `UnboundLocalError: cannot access local "
        "variable 'grad_x' where it is not associated with a value`. Bind every gradient to `None` first."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        backward = function.methods.get("backward")
        n_inputs = function.n_inputs
        if backward is None or backward.node is None or n_inputs is None or n_inputs < 2 or not ctx.own(backward):
            return
        ctx_name = backward.ctx_name
        if ctx_name is None or ctx.unit(backward) is None:
            return
        returns = flow.return_statements(backward.node)
        body = list(flow.method_body(backward.node))
        if len(returns) != 1 or not body:
            return
        (ret,) = returns
        last = body[-1]
        if not (isinstance(last, cst.SimpleStatementLine) and any(small is ret for small in last.body)):
            return
        values = (
            [e.value for e in ret.value.elements] if isinstance(ret.value, cst.Tuple) else [ret.value]
        ) if ret.value is not None else []
        parameters = {p.name for p in backward.params}
        flags = _flag_names(body, ctx_name)
        for value in values:
            if not isinstance(value, cst.Name) or value.value in parameters:
                continue
            guard = self._only_guarded(value.value, body[:-1], ctx_name, flags)
            if guard is None or guard >= n_inputs:
                continue
            yield Report(
                ctx.position(backward, ret),
                f"{function.name}.backward returns `{value.value}`, bound only when "
                f"ctx.needs_input_grad[{guard}] is true: when input {guard} does not require grad (and another "
                f"input does), backward raises `UnboundLocalError`; bind `{value.value} = None` first",
            )
            return  # one finding per return: the first name that can be unbound

    @staticmethod
    def _only_guarded(
        name: str, statements: Sequence[cst.BaseStatement], ctx_name: str, flags: dict[str, int]
    ) -> int | None:
        """The flag of the guard when ``name`` is bound only in the body of ``if <flag>:``
        statements without an ``else``; None when it may be bound otherwise."""
        guard: int | None = None
        for statement in statements:
            binds = _binds(statement)
            if "*" in binds:
                return None
            if name not in binds:
                continue
            if not isinstance(statement, cst.If) or statement.orelse is not None:
                return None
            index = _guard_index(statement.test, ctx_name, flags)
            if index is None or (guard is not None and index != guard):
                return None
            guard = index
        return guard

    VALID = [
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
                    if ctx.needs_input_grad[0]:
                        grad_x = grad @ w
                    if ctx.needs_input_grad[1]:
                        grad_w = grad.t() @ x
                    return grad_x, grad_w
            """
        ),
        # The one return is not backward's last statement line (it sits in a `with` block):
        # not this rule's shape, and every name is bound before it anyway.
        Valid(
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
                    with torch.autograd.profiler.record_function("scale_backward"):
                        return grad * w, grad * x
            """
        ),
        # One input: its flag is true whenever backward runs.
        Valid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    if ctx.needs_input_grad[0]:
                        grad_x = grad * 2
                    return grad_x
            """
        ),
        # An else binds it too.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    if ctx.needs_input_grad[0]:
                        grad_x = grad * w
                    else:
                        grad_x = None
                    grad_w = grad * x if ctx.needs_input_grad[1] else None
                    return grad_x, grad_w
            """
        ),
        # A guard that is not one flag (`any(...)` is true whenever backward runs).
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x * w

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    if any(ctx.needs_input_grad):
                        grad_x = grad * w
                        grad_w = grad * x
                    return grad_x, grad_w
            """
        ),
    ]
    INVALID = [
        Invalid(
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
                    if ctx.needs_input_grad[0]:
                        grad_x = grad @ w
                    if ctx.needs_input_grad[1]:
                        grad_w = grad.t() @ x
                    return grad_x, grad_w
            """,
            line=16,
            message="Linear.backward returns `grad_x`, bound only when ctx.needs_input_grad[0] is true: when "
            "input 0 does not require grad (and another input does), backward raises `UnboundLocalError`",
        ),
        # The flags unpacked into names.
        Invalid(
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
                    need_x, need_s = ctx.needs_input_grad
                    grad_x = grad * s if need_x else None
                    if need_s:
                        grad_s = (grad * x).sum()
                    return grad_x, grad_s
            """,
            line=16,
            message="returns `grad_s`, bound only when ctx.needs_input_grad[1] is true",
        ),
        # A classmethod backward: ctx is the second parameter.
        Invalid(
            """
            import torch

            class Add(torch.autograd.Function):
                @classmethod
                def forward(cls, ctx, a, b):
                    return a + b

                @classmethod
                def backward(cls, ctx, grad):
                    need_a = ctx.needs_input_grad[0]  # a flag bound from one index
                    if need_a:
                        grad_a = grad
                    if ctx.needs_input_grad[1]:
                        grad_b = grad
                    return grad_a, grad_b
            """,
            line=15,
            message="Add.backward returns `grad_a`",
        ),
    ]
