"""AGL018: tensors passed to ``Fn.apply`` inside a list, tuple, dict or set."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from autograd_lint.model.analysis import ModuleNeed
from autograd_lint.model.exprs import is_literal
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import Kind

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

_CONTAINER_WORDS = {
    cst.List: "a list",
    cst.Tuple: "a tuple",
    cst.Set: "a set",
    cst.Dict: "a dict",
    cst.ListComp: "a list comprehension",
    cst.SetComp: "a set comprehension",
    cst.DictComp: "a dict comprehension",
    cst.GeneratorExp: "a generator",
}


def _elements(container: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(container, (cst.List, cst.Tuple, cst.Set)):
        return [e.value for e in container.elements]
    if isinstance(container, cst.Dict):
        return [e.value for e in container.elements]  # `**other` elements are dicts themselves
    if isinstance(container, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return [container.elt]
    if isinstance(container, cst.DictComp):
        return [container.value]
    return []


def _container_of_tensors(annotation: str | None) -> bool:
    """``List[Tensor]``, ``tuple[torch.Tensor, ...]``, ``Sequence[Tensor]`` and the like."""
    if annotation is None:
        return False
    text = annotation.replace(" ", "")
    head, _, inner = text.partition("[")
    return bool(inner) and "Tensor" in inner and head.rsplit(".", 1)[-1].lower() in (
        "list", "tuple", "sequence", "iterable", "dict", "mapping", "set",
    )


class ContainerArguments(Rule):
    """Reports a call ``Fn.apply(...)`` (or through an alias ``f = Fn.apply``) for a
    Function of this module that passes a list, tuple, dict or set literal, or a
    comprehension, holding a tensor.  Autograd only tracks tensors passed directly,
    so those tensors get no gradient.  A container counts only when one of its
    elements is certainly a tensor (a ``torch.*`` call, a tensor-only method, a
    name annotated ``Tensor`` or used as one), or forward annotates the matching
    parameter as a container of tensors; containers of shapes, strides or flags
    (``(stride, stride)``) are left alone, and so is ``*[a, b]``, which passes the
    elements one by one."""

    code = "AGL018"
    title = "tensors passed to `.apply` inside a container"
    severity = Severity.WARNING
    needs = frozenset({ModuleNeed.APPLY_CONTAINERS})
    why = (
        "No error: tensors inside a list, tuple or dict argument are not tracked by autograd, so "
        "the output has `requires_grad == False` (when no other input requires grad) and no "
        "gradient reaches them."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        index = analysis.apply_index
        if index is None:
            return
        for call, function in index.applied_calls():
            inputs = function.forward_inputs
            for position, arg in enumerate(call.args):
                if arg.star or type(arg.value) not in _CONTAINER_WORDS:
                    continue
                elements = [e for e in _elements(arg.value) if not is_literal(e)]
                if not elements:
                    continue
                mapped = inputs is not None and arg.keyword is None and not any(a.star for a in call.args[:position])
                param = inputs[position] if mapped and position < len(inputs) else None  # type: ignore[index,arg-type]
                declared = param is not None and _container_of_tensors(param.annotation)
                kind = index.kinds_around(call)
                tensors = [e for e in elements if kind(e) is Kind.TENSOR]
                if not tensors and not declared:
                    continue
                shown = ", ".join(f"`{index.unit.code(e)}`" for e in (tensors or elements)[:3])
                where = f"argument `{arg.keyword.value}`" if arg.keyword else f"argument {position + 1}"
                yield Report(
                    index.unit.position(arg.value),
                    f"{function.name}.apply gets {_CONTAINER_WORDS[type(arg.value)]} holding {shown} "
                    f"as {where}; autograd does not look inside containers, so no gradient "
                    "reaches those tensors (pass them as separate arguments)",
                )

    VALID = [
        Valid(
            """
            import torch

            class Add(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    return a + b

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad

            def add_all(tensors):
                return Add.apply(*[t.float() for t in tensors][:2])
            """
        ),
        # A tuple of shape numbers, not tensors.
        Valid(
            """
            import torch

            class Pool(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, kernel):
                    ctx.kernel = kernel
                    return torch.nn.functional.avg_pool2d(x, kernel)

                @staticmethod
                def backward(ctx, grad):
                    return grad, None

            def pool(x: torch.Tensor, size: int) -> torch.Tensor:
                return Pool.apply(x, (size, size))
            """
        ),
        # Trap 6: resolve names, don't match them: the parameter `Cat` is not the class.
        Valid(
            """
            import torch

            class Cat(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    return grad

            def run(Cat, x: torch.Tensor):
                return Cat.apply([x, x])
            """
        ),
        # Literal-only containers (flags, sizes) carry no tensor.
        Valid(
            """
            import torch

            class Resize(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, size):
                    return x.new_zeros(size)

                @staticmethod
                def backward(ctx, grad):
                    return None, None

            out = Resize.apply(torch.ones(2), [3, 4])
            """
        ),
        # The loop rebinds `n` to integers: the tuple holds ints there, whatever `n` was before.
        Valid(
            """
            import torch

            class Pool(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, kernel):
                    ctx.kernel = kernel
                    return torch.nn.functional.avg_pool2d(x, kernel)

                @staticmethod
                def backward(ctx, grad):
                    return grad, None

            def pool(x: torch.Tensor, n):
                for n in range(n.numel(), 4):
                    x = x * 2
                return Pool.apply(x, (n, n))
            """
        ),
        # `.size()` is not evidence of a tensor (process groups have one).
        Valid(
            """
            import torch

            class Gather(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, meta):
                    ctx.meta = meta
                    return x * 1

                @staticmethod
                def backward(ctx, grad):
                    return grad, None

            def gather(x: torch.Tensor, group):
                world = group.size()
                return Gather.apply(x, (group, world))
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(ctx, tensors):
                    return sum(tensors)

                @staticmethod
                def backward(ctx, grad):
                    return None

            def total(a: torch.Tensor, b: torch.Tensor):
                return Sum.apply([a, b])
            """,
            line=13,
            message="Sum.apply gets a list holding `a`, `b` as argument 1",
        ),
        Invalid(
            """
            import torch
            from typing import List

            class Stack(torch.autograd.Function):
                @staticmethod
                def forward(ctx, xs: List[torch.Tensor], dim):
                    return torch.stack(xs, dim)

                @staticmethod
                def backward(ctx, grad):
                    return None, None

            def stack(inputs, dim):
                return Stack.apply([x for x in inputs], dim)
            """,
            line=14,
            message="gets a list comprehension holding `x`",
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, extra):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2, None

            scale = Scale.apply
            y = scale(torch.ones(3), {"bias": torch.zeros(3)})
            """,
            line=13,
            message="Scale.apply gets a dict holding `torch.zeros(3)` as argument 2",
        ),
    ]
