"""AGL004: a non-tensor passed to a ctx API that only accepts tensors."""

from __future__ import annotations

from typing import Iterator

from autograd_lint.rules._common import ctx_writers
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import Expr, FunctionSpec, Kind, MethodSpec

# The ctx APIs that accept tensors only, and whether each also accepts None (a no-op).
_ACCEPTS_NONE = {
    "save_for_backward": True,
    "save_for_forward": True,
    "mark_dirty": False,
    "mark_non_differentiable": False,
}


def _tuple_parameters(function: FunctionSpec, method: MethodSpec) -> dict[str, str]:
    """setup_context's ``inputs`` (always a tuple) and ``output`` (a tuple when every
    forward ``return`` is a tuple literal) parameters, by name, unless rebound."""
    if method.name != "setup_context" or method.node is None:
        return {}
    positional = method.positional
    found: dict[str, str] = {}
    if len(positional) > 1:
        found[positional[1].name] = "the `inputs` tuple"
    forward = function.method("forward")
    if (
        len(positional) > 2
        and forward is not None
        and forward.returns
        and all(r.shape in ("tuple", "tuple-starred") for r in forward.returns)
    ):
        found[positional[2].name] = "the `output` tuple (forward returns a tuple)"
    semantic = method.semantic
    if semantic is None:
        return {}
    return {name: what for name, what in found.items() if not semantic.is_rebound(name)}


class NonTensorCtxApiArgument(Rule):
    """Reports an argument of ``ctx.save_for_backward``, ``ctx.save_for_forward``,
    ``ctx.mark_dirty`` or ``ctx.mark_non_differentiable`` (in forward, combined
    style, or setup_context) that is certainly not a tensor: a literal, a
    container, a shape or size, a parameter annotated or defaulted as a
    non-tensor.  ``None`` is accepted by the two save APIs.  In split style,
    passing setup_context's ``inputs`` parameter itself, or ``output`` when
    forward returns a tuple, is reported too."""

    code = "AGL004"
    title = "non-tensor passed to save_for_backward / save_for_forward / mark_dirty / mark_non_differentiable"
    severity = Severity.ERROR
    why = (
        "The call fails in forward: `TypeError: save_for_backward can only save variables, but "
        "argument 1 is of type int` (`... of type tuple` for setup_context's `inputs`); "
        "`AssertionError: save_for_forward expects all arguments to be tensors; you should save "
        "non-tensors as attributes on ctx.`; `RuntimeError: mark_dirty can only accept variables, "
        "but argument `; `RuntimeError: mark_non_differentiable only accepts variable arguments, "
        "but got `."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for method in ctx_writers(function):
            if not ctx.own(method):
                continue
            tuples: dict[str, str] | None = None
            for call in method.ctx_calls:
                if call.api not in _ACCEPTS_NONE:
                    continue
                for arg in call.args:
                    if tuples is None:
                        tuples = _tuple_parameters(function, method)
                    what = self._not_a_tensor(arg, _ACCEPTS_NONE[call.api], tuples)
                    if what is not None:
                        yield Report(
                            call.position,
                            f"{function.name}.{method.name} passes {what} `{arg.text}` to "
                            f"ctx.{call.api}, which only accepts tensors"
                            + (" (or None)" if _ACCEPTS_NONE[call.api] else ""),
                        )

    @staticmethod
    def _not_a_tensor(arg: Expr, accepts_none: bool, tuples: dict[str, str]) -> str | None:
        """What ``arg`` is, when it is certainly not acceptable; else ``None``."""
        if arg.kind is Kind.NON_TENSOR:
            return "the non-tensor"
        if arg.kind is Kind.NONE and not accepts_none:
            return "literal"
        if arg.name is not None and arg.name in tuples:
            return tuples[arg.name]
        return None

    VALID = [
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, scale: float):
                    ctx.save_for_backward(a, b, None)
                    ctx.scale = scale
                    return a * b * scale

                @staticmethod
                def backward(ctx, grad):
                    a, b, _ = ctx.saved_tensors
                    return grad * b * ctx.scale, grad * a * ctx.scale, None
            """
        ),
        # Trap 17: split style unpacks `inputs`; a single-tensor `output` may be saved.
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(x, dim):
                    return torch.exp(x)

                @staticmethod
                def setup_context(ctx, inputs, output):
                    x, dim = inputs
                    ctx.save_for_backward(output)
                    ctx.mark_non_differentiable(*inputs[1:])

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y, None
            """
        ),
        # Trap 3: setup_context(ctx, *args) has no `inputs` parameter to report.
        Valid(
            """
            import torch

            class Double(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return (x * 2,)

                @staticmethod
                def setup_context(ctx, *args):
                    inputs, output = args
                    ctx.save_for_backward(*inputs)

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """
        ),
        # Elements of a list of tensors are tensors; mark_dirty gets an input.
        Valid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, y):
                    pair = [x, y]
                    ctx.save_for_backward(pair[0], pair[1])
                    ctx.mark_dirty(x)
                    x.mul_(2)
                    return x, y * 2

                @staticmethod
                def backward(ctx, gx, gy):
                    return gx * 2, gy * 2
            """
        ),
        # Trap 5: `inputs` rebound to its first element (a tensor) before it is saved.
        Valid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * x

                @staticmethod
                def setup_context(ctx, inputs, output):
                    inputs = inputs[0]
                    ctx.save_for_backward(inputs)

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad
            """
        ),
        # A union parameter narrowed to its tensor branch by isinstance.
        Valid(
            """
            from typing import Union

            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale: Union[float, torch.Tensor]):
                    if isinstance(scale, torch.Tensor):
                        ctx.save_for_backward(x, scale)
                    else:
                        ctx.save_for_backward(x, None)
                        ctx.scale = scale
                    return x * scale

                @staticmethod
                def backward(ctx, grad):
                    x, scale = ctx.saved_tensors
                    return grad * (ctx.scale if scale is None else scale), None
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Sum(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, dim: int):
                    ctx.save_for_backward(x, dim)
                    return x.sum(dim)

                @staticmethod
                def backward(ctx, grad):
                    x, dim = ctx.saved_tensors
                    return grad.unsqueeze(dim).expand_as(x), None
            """,
            line=6,
            message="Sum.forward passes the non-tensor `dim` to ctx.save_for_backward",
        ),
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x * y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs)

                @staticmethod
                def backward(ctx, grad):
                    x, y = ctx.saved_tensors
                    return grad * y, grad * x
            """,
            line=10,
            message="passes the `inputs` tuple `inputs` to ctx.save_for_backward",
        ),
        Invalid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x[:1] * 2, x[1:] * 2

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.mark_non_differentiable(output)

                @staticmethod
                def backward(ctx, g1, g2):
                    return torch.cat([g1, g2]) * 2
            """,
            line=10,
            message="the `output` tuple",
        ),
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_forward([x])
                    ctx.mark_non_differentiable(None)
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """,
            line=7,
            message="literal `None` to ctx.mark_non_differentiable",
        ),
        # The float branch of a union parameter is saved as if it were a tensor.
        Invalid(
            """
            from typing import Union

            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, scale: Union[float, torch.Tensor]):
                    if isinstance(scale, float):
                        ctx.save_for_backward(x, scale)
                    return x * scale

                @staticmethod
                def backward(ctx, grad):
                    x, scale = ctx.saved_tensors
                    return grad * scale, None
            """,
            line=9,
            message="Scale.forward passes the non-tensor `scale` to ctx.save_for_backward",
        ),
    ]
