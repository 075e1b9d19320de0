"""AGL010: a combined-style Function (no ``setup_context``) handed to a torch.func transform."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.analysis import ModuleNeed
from autograd_lint.model.analysis import TRANSFORM_MODULES, TRANSFORMS
from autograd_lint.model.exprs import dotted_name
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import FunctionSpec
from autograd_lint.model.usage import ApplyIndex

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings


def _transform_name(call: cst.Call, index: ApplyIndex) -> str | None:
    """``torch.func.grad`` (or ``torch.vmap``...) when ``call`` calls a transform."""
    name = dotted_name(call.func)
    qualified = index.imports.resolve(name) if name else None
    if qualified is None:
        return None
    module, _, function = qualified.rpartition(".")
    if qualified == "torch.vmap" or (module in TRANSFORM_MODULES and function in TRANSFORMS):
        return qualified
    return None


def _function_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The function a transform is applied to: its first argument, or ``func=``."""
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None or arg.keyword.value == "func":
            return arg.value
    return None


def _applies_in(node: cst.CSTNode, index: ApplyIndex) -> list[FunctionSpec]:
    """Functions whose ``apply`` is called in ``node`` (nested ``def``/``class`` excluded),
    from the module's call index."""
    found: list[FunctionSpec] = []
    for call in index.calls:
        function = index.applied(call.func)
        if function is not None and function not in found and _runs_in(call, node, index):
            found.append(function)
    return found


def _runs_in(call: cst.Call, node: cst.CSTNode, index: ApplyIndex) -> bool:
    """Whether ``call`` sits in ``node`` and not in a ``def``/``class`` nested in it."""
    current: cst.CSTNode | None = call
    while current is not None and current is not node:
        if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            return False
        current = index.parents.get(current)
    return current is node


def _reached(expr: cst.BaseExpression, index: ApplyIndex) -> tuple[list[FunctionSpec], str | None]:
    """Functions whose ``apply`` runs when the transform calls ``expr``, and the
    wrapper it runs through (``None`` when ``expr`` is ``Fn.apply`` or its alias).

    In ``vmap(grad(f))`` only ``grad`` is credited with ``f``: it is reported once.
    """
    function = index.applied(expr)
    if function is not None:
        return [function], None
    if isinstance(expr, cst.Lambda):
        return _applies_in(expr.body, index), "a lambda"
    if isinstance(expr, cst.Name):
        bound = index.binding(expr)
        if isinstance(bound, cst.FunctionDef):
            return _applies_in(bound, index), f"`{expr.value}`"
    return [], None


class CombinedStyleTransform(Rule):
    """Reports a torch.func transform (``grad``, ``vjp``, ``jvp``, ``jacrev``,
    ``jacfwd``, ``hessian``, ``vmap`` ...) called on ``Fn.apply``, on an alias of it,
    or on a ``lambda`` or a function of this module that calls it, when ``Fn`` is
    a combined-style Function (forward takes ctx, ``setup_context`` is not
    overridden): transforms only support the split style, and ``apply`` raises.
    A Function whose base classes are not all known is left alone, since a base
    may define ``setup_context``."""

    code = "AGL010"
    title = "combined-style Function (no `setup_context`) is not usable with torch.func"
    severity = Severity.ERROR
    needs = frozenset({ModuleNeed.APPLY_TRANSFORMS})
    why = (
        "`RuntimeError: In order to use an autograd.Function with functorch transforms (vmap, "
        "grad, jvp, jacrev, ...), it must override the setup_context staticmethod. For more "
        "details, please see https://pytorch.org/docs/main/notes/extending.func.html`"
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        index = analysis.apply_index
        if index is None:
            return
        for call in index.calls:
            transform = _transform_name(call, index)
            argument = _function_argument(call) if transform is not None else None
            if argument is None:
                continue
            functions, through = _reached(argument, index)
            for function in functions:
                if function.is_split_style is not False:
                    continue
                via = f" through {through}" if through else ""
                yield Report(
                    index.unit.position(call),
                    f"{function.name}.apply reaches {transform}{via}, but {function.name} does not "
                    "override setup_context (forward takes ctx), so the transform raises; move the "
                    "ctx code into a setup_context staticmethod",
                )

    VALID = [
        # The split style is what torch.func supports.
        Valid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0])

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad

            dsquare = torch.func.grad(lambda x: Square.apply(x).sum())
            """
        ),
        # Trap 5: setup_context inherited from a base class.
        Valid(
            """
            import torch
            from torch.func import vmap

            class Base(torch.autograd.Function):
                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

            class Neg(Base):
                generate_vmap_rule = True

                @staticmethod
                def forward(x):
                    return -x

                @staticmethod
                def backward(ctx, grad):
                    return -grad

            batched = vmap(Neg.apply)
            """
        ),
        # Trap 5: the base is imported and may define setup_context.
        Valid(
            """
            import torch
            from mylib import SplitBase

            class Cube(SplitBase):
                @staticmethod
                def forward(x):
                    return x ** 3

            cube_grad = torch.func.grad(Cube.apply)
            """
        ),
        # Not a torch.func transform: torch.autograd.functional works with any Function.
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

            jac = torch.autograd.functional.jacobian(Exp.apply, torch.ones(3))
            """
        ),
    ]
    INVALID = [
        Invalid(
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

            batched_exp = torch.vmap(Exp.apply)
            """,
            line=15,
            message="Exp.apply reaches torch.vmap, but Exp does not override setup_context",
        ),
        Invalid(
            """
            import torch
            from torch.func import grad

            class Sin(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.sin()

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return g * x.cos()

            def loss(x):
                return Sin.apply(x).sum()

            dloss = grad(loss)
            """,
            line=18,
            message="Sin.apply reaches torch.func.grad through `loss`",
        ),
        Invalid(
            """
            import functorch
            import torch

            class Relu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.clamp(min=0)

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return g * (x > 0)

            relu = Relu.apply
            per_sample = functorch.vmap(functorch.grad(lambda x: relu(x).sum()))
            """,
            line=16,
            message="Relu.apply reaches functorch.grad through a lambda",
        ),
    ]
