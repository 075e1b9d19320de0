"""AGL014: backward returns a gradient for a forward input that is not a tensor."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.model.exprs import annotation_kind
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import Expr, Kind, Param


def _non_tensor_reason(param: Param) -> str | None:
    """Why ``param`` certainly receives a non-tensor, or None when it may be a tensor.

    Trap 16: a ``None`` default or an ``Optional[Tensor]`` annotation is an optional
    tensor input, which may get a gradient.
    """
    declared = annotation_kind(param.annotation)
    if declared is Kind.NON_TENSOR:
        return f"annotated `{param.annotation}`"
    if declared is Kind.UNKNOWN and param.default is not None and param.default.kind is Kind.NON_TENSOR:
        return f"default `{param.default.text}`"
    return None


class GradientForNonTensor(Rule):
    """Reports a ``return`` of ``backward`` (or ``vjp``) that gives a value other than
    ``None`` for a forward input that is not a tensor: one annotated ``int``, ``float``,
    ``bool``, ``str``, ``tuple``, ``list``, ``dict``, ``torch.dtype``, ``torch.device``,
    ``Callable`` and the like, or one with a literal non-``None`` default.  Only values
    that are certainly not ``None`` count (a tensor expression or a literal); a local
    that may still be ``None`` (``g = None`` then ``if ctx.needs_input_grad[1]: g = ...``)
    does not.  Returns whose length syntax can't tell are skipped."""

    code = "AGL014"
    title = "non-`None` gradient returned for a non-tensor forward input"
    severity = Severity.ERROR
    why = (
        "Backward fails: `RuntimeError: function FBackward returned a gradient different "
        "than None at position 2, but the corresponding forward input was not a Variable` "
        "(the position is 1-based)."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        inputs = function.forward_inputs
        if inputs is None:
            return
        reasons = {i: reason for i, param in enumerate(inputs) if (reason := _non_tensor_reason(param))}
        if not reasons:
            return
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is None:
                continue
            for ret in method.returns:
                elements: tuple[Expr, ...]
                if ret.elements is not None:
                    elements = ret.elements
                elif len(inputs) == 1 and ret.shape == "other" and ret.value is not None:
                    elements = (ret.value,)
                else:
                    continue
                for index, reason in reasons.items():
                    if index >= len(elements) or elements[index].kind not in (Kind.TENSOR, Kind.NON_TENSOR):
                        continue
                    yield Report(
                        ret.position,
                        f"{function.name}.{name} returns `{elements[index].text}` at position "
                        f"{index + 1} for forward input `{inputs[index].name}`, which is not a "
                        f"tensor ({reason}); its gradient must be None",
                    )

    VALID = [
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, factor: float):
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor, None
            """
        ),
        # Trap 16: optional tensor inputs (None default, Optional[Tensor]) may get gradients.
        Valid(
            """
            from typing import Optional

            import torch
            from torch import Tensor

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, bias=None, extra: Optional[Tensor] = None):
                    ctx.save_for_backward(x, weight)
                    out = x @ weight.t()
                    return out if bias is None else out + bias

                @staticmethod
                def backward(ctx, grad):
                    x, weight = ctx.saved_tensors
                    return grad @ weight, grad.t() @ x, grad.sum(0) * 1, grad * 0
            """
        ),
        # A local that stays None when the input does not need a gradient.
        Valid(
            """
            import torch

            class Pow(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, exponent=2):
                    ctx.save_for_backward(x)
                    ctx.exponent = exponent
                    return x ** exponent

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    grad_exponent = None
                    if ctx.needs_input_grad[1]:
                        grad_exponent = grad * x.log()
                    return grad * ctx.exponent * x ** (ctx.exponent - 1), grad_exponent
            """
        ),
        # Trap 3: *args makes the inputs unknown; trap 17: split style counts every
        # forward parameter, so the non-tensor `dim` is input 2 and gets None.
        Valid(
            """
            import torch

            class Cat(torch.autograd.Function):
                @staticmethod
                def forward(ctx, dim: int, *tensors):
                    return torch.cat(tensors, dim)

                @staticmethod
                def backward(ctx, grad):
                    return None, grad, grad

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(x, dim: int = 0):
                    return x.sum(dim)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, dim = inputs
                    ctx.shape, ctx.dim = x.shape, dim

                @staticmethod
                def backward(ctx, grad):
                    return grad.unsqueeze(ctx.dim).expand(ctx.shape), None
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, factor: float):
                    ctx.save_for_backward(x)
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * ctx.factor, grad * x
            """,
            line=13,
            message="Scale.backward returns `grad * x` at position 2 for forward input `factor`, "
            "which is not a tensor (annotated `float`)",
        ),
        Invalid(
            """
            import torch

            class Clip(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, low=0.0, high=1.0):
                    return x.clamp(low, high)

                @staticmethod
                def backward(ctx, grad):
                    return grad, None, 0
            """,
            line=10,
            message="returns `0` at position 3 for forward input `high`, which is not a tensor (default `1.0`)",
        ),
        Invalid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(x, dim: int):
                    return x.sum(dim)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, dim = inputs
                    ctx.shape, ctx.dim = x.shape, dim

                @staticmethod
                def backward(ctx, grad):
                    g = grad.unsqueeze(ctx.dim).expand(ctx.shape)
                    return g, g
            """,
            line=16,
            message="at position 2 for forward input `dim`",
        ),
    ]
