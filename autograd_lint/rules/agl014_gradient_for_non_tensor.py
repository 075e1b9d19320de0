"""AGL014: backward returns a gradient for a forward input that is not a tensor."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid
from autograd_lint.model.spec import Expr, Kind, MethodSpec, Param


def _non_tensor_reason(param: Param, forward: MethodSpec) -> str | None:
    """Why ``param`` certainly receives a non-tensor, or None when it may be a tensor.

    The kind is the semantic model's (annotation read as a type, else a literal
    default).  Trap 16: a ``None`` default, ``Optional[Tensor]`` or a union such as
    ``int | Tensor`` may be a tensor input, which may get a gradient.
    """
    if forward.param_kinds.get(param.name) is not Kind.NON_TENSOR:
        return None
    if param.annotation is not None:
        return f"annotated `{param.annotation}`"
    if param.default is not None:
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
        forward = function.method("forward")
        if inputs is None or forward is None:
            return
        reasons = {
            i: reason for i, param in enumerate(inputs) if (reason := _non_tensor_reason(param, forward))
        }
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
                    if index >= len(elements) or not (elements[index].kind.is_tensor or elements[index].kind is Kind.NON_TENSOR):
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
        # A union of int and Tensor is not "not a tensor": a tensor may come in.
        Valid(
            """
            from typing import Union

            import torch

            class Shift(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, offset: Union[int, torch.Tensor] = 0):
                    return x + offset

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad.sum()
            """
        ),
        # The body contradicts the annotation: `threshold` goes to torch.sigmoid, so it
        # may be a tensor (and its gradient is then right).
        Valid(
            """
            import torch

            class Prune(torch.autograd.Function):
                @staticmethod
                def forward(ctx, inputs, threshold: float, sigmoid: bool):
                    if sigmoid:
                        threshold = torch.sigmoid(threshold).item()
                    ctx.sigmoid = sigmoid
                    return (inputs.abs() > threshold).to(inputs.dtype)

                @staticmethod
                def backward(ctx, grad):
                    if ctx.sigmoid:
                        return grad, grad.sum().view(1), None
                    return grad, None, None
            """
        ),
        # A classmethod forward: `cls` is not an input, so `scale` is input 2 and gets None.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @classmethod
                def forward(cls, ctx, x, scale: float):
                    ctx.scale = scale
                    return x * scale

                @classmethod
                def backward(cls, ctx, grad):
                    return grad * ctx.scale, None
            """
        ),
    ]
    INVALID = [
        # The gradient goes through a local bound (by a tuple target) to a tensor expression.
        Invalid(
            """
            import torch

            class Power(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, p: int):
                    ctx.save_for_backward(x)
                    ctx.p = p
                    return x ** p

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    gx, gp = grad * ctx.p * x ** (ctx.p - 1), (grad * x.log()).sum()
                    return gx, gp
            """,
            line=14,
            message="returns `gp` at position 2 for forward input `p`, which is not a tensor (annotated `int`)",
        ),
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
