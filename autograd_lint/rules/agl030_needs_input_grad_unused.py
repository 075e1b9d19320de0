"""AGL030: backward never consults ``ctx.needs_input_grad`` (performance; off by default)."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.semantic import MethodModel
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)

# Operations whose cost makes computing an unneeded gradient worth avoiding.
EXPENSIVE = frozenset({"mm", "matmul", "bmm", "einsum"})
# torch.conv2d, F.conv_transpose2d, torch.nn.grad.conv2d_weight, torch.convolution, ...
_CONVOLUTIONS = ("conv1d", "conv2d", "conv3d", "conv_transpose", "convolution", "conv_tbc")


def _is_expensive_name(name: str) -> bool:
    return name in EXPENSIVE or name.startswith(_CONVOLUTIONS)


def _own_operation(node: cst.BaseExpression, imports: ImportMap) -> str | None:
    """The first expensive operation written in ``node`` itself (not in a nested ``lambda``)."""
    for part in traverse.walk(node, scopes=False):
        if isinstance(part, cst.BinaryOperation) and isinstance(part.operator, cst.MatrixMultiply):
            return "@"
        if isinstance(part, cst.Call):
            func = part.func
            name = dotted_name(func)
            qualified = imports.resolve(name) if name else None
            if qualified is not None:
                if qualified.startswith("torch.") and _is_expensive_name(qualified.rsplit(".", 1)[-1]):
                    return qualified
            elif isinstance(func, cst.Attribute) and func.attr.value in EXPENSIVE:
                return f".{func.attr.value}()"
    return None


class NeedsInputGradUnused(Rule):
    """Reports a ``backward`` (or ``vjp``) that returns two or more gradients built
    with expensive operations (``mm``, ``matmul``, ``bmm``, ``@``, ``einsum``,
    ``conv*``), directly or through local names, and never reads
    ``ctx.needs_input_grad``: every gradient is computed even when its input does
    not require one.  Only ``return`` tuple literals are looked at, and backward
    is skipped when it hands ctx to other code, which may read the flags.  Off by
    default: it is a performance hint."""

    code = "AGL030"
    title = "`needs_input_grad` never consulted (performance)"
    severity = Severity.INFO
    enabled_by_default = False
    why = (
        "No error: gradients for inputs that do not require grad are computed and then thrown "
        "away (the docs: \"Returning gradients for inputs that don't require it is not an "
        "error\"), which costs the time and memory of each expensive product."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is None or method.node is None or ctx.unit(method) is None:
                continue
            if method.reads("needs_input_grad") or method.reads("needs_input_grad[]"):
                continue
            ctx_name = method.ctx_name
            semantic = method.semantic
            if ctx_name is None or semantic is None or semantic.escapes(ctx_name, in_nested_scopes=False):
                continue
            unit = ctx.unit(method)
            assert unit is not None
            for returned in semantic.returns:
                if returned.elements is None or any(isinstance(e, cst.StarredElement) for e in returned.elements):
                    continue
                expensive: dict[str, str] = {}  # element source -> operation
                for element in returned.elements:
                    operation = _operation(element, semantic, ctx.analysis.imports, set())
                    if operation is not None:
                        expensive.setdefault(unit.code(element), operation)
                if len(expensive) >= 2:
                    listed = ", ".join(f"`{text}`" for text in expensive)
                    operations = ", ".join(sorted(set(expensive.values())))
                    yield Report(
                        method.position,
                        f"{function.name}.{name} computes {len(expensive)} gradients with "
                        f"{operations} ({listed}) but never reads ctx.needs_input_grad, so "
                        "each is computed even when its input does not require grad",
                    )
                    break

    VALID = [
        # Trap 15: one guard shared by two gradients still consults the flags.
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
        # Only one expensive gradient; the other is cheap.
        Valid(
            """
            import torch

            class Bias(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, b):
                    ctx.save_for_backward(w)
                    return x.mm(w) + b

                @staticmethod
                def backward(ctx, grad):
                    (w,) = ctx.saved_tensors
                    return grad.mm(w.t()), None, grad.sum(0)
            """
        ),
        # Trap 14: a helper receives ctx and may read needs_input_grad there.
        Valid(
            """
            import torch

            def _grads(ctx, grad, x, w):
                return grad @ w, grad.t() @ x

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x @ w.t()

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    gx, gw = _grads(ctx, grad, x, w)
                    return gx, gw
            """
        ),
        # Trap 2: a returned variable whose elements syntax can't tell (grown in a loop).
        Valid(
            """
            import torch

            class Bmm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return torch.bmm(a, b)

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    grads = []
                    for left, right in ((grad, b.transpose(1, 2)), (a.transpose(1, 2), grad)):
                        grads.append(torch.bmm(left, right))
                    return tuple(grads)
            """
        ),
    ]
    INVALID = [
        # `tuple(grads)` of a list literal: the model knows both elements.
        Invalid(
            """
            import torch

            class Bmm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return torch.bmm(a, b)

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    grads = [torch.bmm(grad, b.transpose(1, 2)), torch.bmm(a.transpose(1, 2), grad)]
                    return tuple(grads)
            """,
            line=10,
            message="Bmm.backward computes 2 gradients with torch.bmm",
        ),
        Invalid(
            """
            import torch

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x.mm(w.t())

                @staticmethod
                def backward(ctx, grad):
                    x, w = ctx.saved_tensors
                    return grad.mm(w), grad.t().mm(x)
            """,
            line=10,
            message="Linear.backward computes 2 gradients with .mm() (`grad.mm(w)`, `grad.t().mm(x)`)",
        ),
        Invalid(
            """
            import torch

            class Bilinear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return torch.einsum("ij,jk->ik", a, b)

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    grad_a = torch.einsum("ik,jk->ij", grad, b)
                    grad_b = torch.einsum("ij,ik->jk", a, grad)
                    return grad_a, grad_b
            """,
            line=10,
            message="computes 2 gradients with torch.einsum",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            class Conv(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, weight)
                    return F.conv2d(x, weight)

                @staticmethod
                def backward(ctx, grad):
                    x, weight = ctx.saved_tensors
                    grad_x = torch.nn.grad.conv2d_input(x.shape, weight, grad)
                    grad_w = torch.nn.grad.conv2d_weight(x, weight.shape, grad)
                    return grad_x, grad_w
            """,
            line=11,
            message="never reads ctx.needs_input_grad",
        ),
    ]


def _operation(
    node: cst.BaseExpression,
    semantic: MethodModel,
    imports: ImportMap,
    seen: set[int],
) -> str | None:
    """The expensive operation ``node`` performs, itself or through the values of the
    bindings it reads (``g = x @ w``, ``g += x @ w``)."""
    operation = _own_operation(node, imports)
    if operation is not None:
        return operation
    for binding in semantic.dependencies(node):
        if id(binding) in seen:
            continue
        seen.add(id(binding))
        values = [binding.value] if binding.value is not None else []
        if isinstance(binding.site, cst.AugAssign):
            values += [binding.site.value, binding.site.target]
        for value in values:
            operation = _operation(value, semantic, imports, seen)
            if operation is not None:
                return operation
    return None
