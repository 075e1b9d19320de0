"""AGL017: forward returns a list/dict, a nested tuple, a numpy array or a Python scalar."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.semantic import MethodModel
from autograd_lint.model.flow import return_statements
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import Kind

_CONTAINERS: dict[type[cst.CSTNode], str] = {
    cst.List: "a list",
    cst.ListComp: "a list comprehension",
    cst.Dict: "a dict",
    cst.DictComp: "a dict comprehension",
    cst.Set: "a set",
    cst.SetComp: "a set comprehension",
}
# Tensor methods that give a Python value or a numpy array.
_CONVERSIONS = {"tolist": "a Python list", "item": "a Python scalar", "numpy": "a numpy array"}


def _untracked(node: cst.BaseExpression, ctx: FunctionContext) -> str | None:
    """What ``node`` is when autograd can't track it as an output, else None."""
    for kind, label in _CONTAINERS.items():
        if isinstance(node, kind):
            return label
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _CONVERSIONS and not node.args:
            return f"{_CONVERSIONS[func.attr.value]} (`.{func.attr.value}()`)"
        name = dotted_name(func)
        if name in ("float", "int") and ctx.analysis.imports.resolve(name) == f"builtins.{name}":
            return f"a Python {name} (`{name}(...)`)"
    return None


def _holds_tensor(node: cst.BaseExpression, model: MethodModel) -> bool:
    """Whether a container literal or comprehension certainly holds a tensor."""
    classify = model.kind
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return any(
            classify(e.value) is Kind.TENSOR or _holds_tensor(e.value, model)
            for e in node.elements
            if not isinstance(e, cst.StarredElement)
        )
    if isinstance(node, cst.Dict):
        return any(
            isinstance(e, cst.DictElement) and classify(e.value) is Kind.TENSOR for e in node.elements
        )
    if isinstance(node, (cst.ListComp, cst.SetComp)):
        return classify(node.elt) is Kind.TENSOR
    if isinstance(node, cst.DictComp):
        return classify(node.value) is Kind.TENSOR
    return False


class ForwardUntrackedOutput(Rule):
    """Reports a ``return`` in forward whose whole value is a list/dict/set literal or
    comprehension, ``.tolist()``, ``.item()``, ``.numpy()``, ``float(...)`` or
    ``int(...)``: autograd tracks only a tensor or a flat tuple of tensors, so such a
    Function has no differentiable output.  Inside a returned tuple it reports a nested
    tuple, list, dict or set that certainly holds a tensor (that tensor loses its
    gradient); a plain Python or numpy value next to tensor outputs is a legitimate
    auxiliary output (split sizes, counts) and is left alone."""

    code = "AGL017"
    title = "forward returns a list/dict, a nested tuple, a numpy array or a Python scalar"
    severity = Severity.WARNING
    why = (
        "No error at `apply`, but the outputs are not tracked: list and dict outputs have "
        "`out[0].requires_grad == False`, as do inner elements of a nested tuple; numpy and "
        "float values come back unchanged. Later use gives missing gradients or `RuntimeError: "
        "element 0 of tensors does not require grad and does not have a grad_fn`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        method = ctx.function.methods.get("forward")
        if method is None or not ctx.own(method) or method.node is None or method.semantic is None:
            return
        for node in return_statements(method.node):
            value = node.value
            position = ctx.position(method, node)
            if value is None:
                continue
            what = _untracked(value, ctx)
            if what is not None:
                yield Report(
                    position,
                    f"{ctx.function.name}.forward returns {what}; autograd tracks only a tensor or "
                    "a tuple of tensors, so the result has no gradient",
                )
                continue
            if not isinstance(value, cst.Tuple):
                continue
            for index, element in enumerate(value.elements):
                inner = element.value
                if isinstance(element, cst.StarredElement) or not isinstance(inner, (cst.Tuple, *_CONTAINERS)):
                    continue
                if _holds_tensor(inner, method.semantic):
                    what = "a nested tuple" if isinstance(inner, cst.Tuple) else _CONTAINERS[type(inner)]
                    yield Report(
                        position,
                        f"{ctx.function.name}.forward returns {what} holding tensors as output "
                        f"{index}; autograd does not look inside it, so those tensors get no gradient",
                    )

    VALID = [
        Valid(
            """
            import torch

            class MulAdd(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b, a + b

                @staticmethod
                def backward(ctx, g1, g2):
                    a, b = ctx.saved_tensors
                    return g1 * b + g2, g1 * a + g2
            """
        ),
        # Trap 2 and 4: a returned variable and a conditional tuple are not containers;
        # split sizes (Python ints) next to a tensor output are an auxiliary output.
        Valid(
            """
            import torch

            class Permute(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, counts, keep: bool):
                    sizes = counts.tolist()
                    ctx.sizes = sizes
                    out = x.flip(0)
                    if keep:
                        return out, sizes
                    result = (out, len(sizes))
                    return result

                @staticmethod
                def backward(ctx, grad, _):
                    return grad.flip(0), None, None
            """
        ),
        # Trap 8: a list built inside a helper or a nested def is not forward's return.
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    def parts():
                        return [x[:1], x[1:]]

                    first, rest = parts()
                    return first.clone(), rest.clone()

                @staticmethod
                def backward(ctx, g1, g2):
                    return torch.cat([g1, g2])
            """
        ),
        # Trap 5: the bad forward is reported once, at its definition, not in the subclass.
        Valid(
            """
            import torch
            from mylib import Base

            class Derived(Base):
                @staticmethod
                def backward(ctx, grad):
                    return [grad]
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return [x[:1].clone(), x[1:].clone()]

                @staticmethod
                def backward(ctx, grads):
                    return torch.cat(grads)
            """,
            line=6,
            message="Split.forward returns a list; autograd tracks only a tensor or a tuple of tensors",
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Norm(Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.norm().item()

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * x / x.norm()
            """,
            line=7,
            message="Norm.forward returns a Python scalar (`.item()`)",
        ),
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(x, h):
                    y = x * 2
                    return y, (torch.tanh(h), h + 1)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, gy, gh):
                    return gy * 2, None
            """,
            line=7,
            message="Pair.forward returns a nested tuple holding tensors as output 1",
        ),
        Invalid(
            """
            import torch

            class Stats(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    if x.dim() == 0:
                        return float(x)
                    return {"mean": x.mean(), "std": x.std()}

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=8,
            message="Stats.forward returns a dict",
        ),
    ]

